"""One module per pipeline stage (prepare, pools, batches, rollout, evolve, gate, slow, holdout).

Used by `stages/*.py` (one process per stage, `dvc repro`) and by
harness/loop/runner.py (all in one process, `python -m stages.train`).

Contract of every stage: read its input dirs, write ONLY its output path;
a workspace-carrying stage (pools/init, gate, slow) copies the previous state
dir, mutates the copy and writes DONE.json last; each stage's
runlog.sqlite holds only its own rows (readers take the chain listed in
lineage.json); the LLM response cache is shared. A stage re-run starts from
an empty output dir and costs nothing thanks to the response cache. What a
stage hands to a later one is a typed document (harness/loop/documents.py).

Once training stopped early (lineage.stopped), later step/slow stages pass
the state through unchanged, marked stopped.
"""
