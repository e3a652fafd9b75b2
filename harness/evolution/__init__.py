"""The loop's "gradient step" (seed 000 §15/§16): diagnosis, edit proposal, edit application, momentum.

Modules: prompts (FORMAT-tagged prompts), parse (reply parsers), apply
(apply_edits), evolve (evolve_single_skill / evolve_system_prompt /
evolve_single_tool / rejected_summary), diagnose (run_diagnosis), momentum.
"""
