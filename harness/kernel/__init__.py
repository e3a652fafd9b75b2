"""Pure decision kernel: pools, batching, information ladder, gate, rules, probation.

API reference: docs/kernel.md.
"""
