"""Hydra launcher `hydra/launcher=processes`: parallel sweep jobs, each in a process of its own."""
