"""Reply formats, headings and their parsers: the contracts between prompts, parsers and the simulated world.

A format that one module writes and another reads lives here, once; prompt
builders (harness/agent, harness/evolution, harness/h2), reply parsers and the
simulated world (harness/sim) all import it from here. This package sits
below every layer that writes prompts or answers them and imports only
plain data types (harness.tree, harness.kernel.types).

- roles.py        the LLM call roles (`Role`) config, providers and prompts name
- solver.py       harness tree layout, the solver's system/question messages, the `ANSWER:` line
- tool_calls.py   the `<tool_call>` / `<tool_result>` blocks of the solver protocol
- evolution.py    diagnoser, editor and momentum reply formats (`FORMAT:` names, headings, parsers)
- harness2.py     Harness² editor file blocks, selector / reflector / judge replies, rollout blocks
- answers.py      the solver's answer extractor (real-model answers)
- certificate.py  the certificate file of training's delivery and of `stages.compare` (one format, one writer)
"""
