"""Pure decision kernel: pools, batching, information ladder, baseline cache, gate, rules, probation.

API reference: docs/kernel.md.
"""
