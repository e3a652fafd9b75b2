"""TEMPORARY stand-ins for kernel modules not landed yet (installed only when the real import fails)."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path


def install() -> list[str]:
    installed = []
    try:
        import harness.kernel.pools  # noqa: F401
    except ImportError:
        m = types.ModuleType("harness.kernel.pools")

        def build_or_load_pools(path, questions, cfg):
            path = Path(path)
            if path.exists():
                return json.loads(path.read_text())
            by = {}
            for q in sorted(questions, key=lambda q: q.qid):
                by.setdefault(q.task_type, []).append(q.qid)
            out = {"test": [], "validation": [], "diagnosis": []}
            n = len(by)
            for key, size in (("test", cfg.test_size), ("validation", cfg.val_size), ("diagnosis", cfg.diagnosis_size)):
                per = max(1, size // n)
                for tt in sorted(by):
                    out[key] += by[tt][:per]
                    by[tt] = by[tt][per:]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(out))
            return out

        m.build_or_load_pools = build_or_load_pools
        sys.modules[m.__name__] = m
        installed.append(m.__name__)
    try:
        import harness.kernel.batching  # noqa: F401
    except ImportError:
        m = types.ModuleType("harness.kernel.batching")

        def make_batches(questions, cfg, correctness, seed):
            qids = sorted(q.qid for q in questions)
            import random
            random.Random(seed).shuffle(qids)
            b = int(cfg.batch_size)
            return [qids[i:i + b] for i in range(0, len(qids), b)]

        m.make_batches = make_batches
        sys.modules[m.__name__] = m
        installed.append(m.__name__)
    try:
        import harness.kernel.baseline_cache  # noqa: F401
    except ImportError:
        m = types.ModuleType("harness.kernel.baseline_cache")

        class BaselineCache:
            def __init__(self, d=None):
                self.d = d or {}

            @classmethod
            def create(cls, path):
                c = cls()
                c.save(path)
                return c

            @classmethod
            def load(cls, path):
                return cls(json.loads(Path(path).read_text()))

            def get(self, *key):
                return self.d.get("|".join(key))

            def put(self, tt, h, pv, qid, v):
                self.d["|".join((tt, h, pv, qid))] = bool(v)

            def save(self, path):
                Path(path).write_text(json.dumps(self.d))

        m.BaselineCache = BaselineCache
        sys.modules[m.__name__] = m
        installed.append(m.__name__)
    try:
        import harness.kernel.probation  # noqa: F401
    except ImportError:
        m = types.ModuleType("harness.kernel.probation")
        from harness.kernel.types import ProbationVerdict

        def probation_verdict(p, rerun):
            common = [q for q in rerun if q in p.correctness_snapshot]
            if not common:
                return ProbationVerdict("keep", 0, 0, 0, None, None, "nothing to compare")
            before = sum(p.correctness_snapshot[q] for q in common) / len(common)
            after = sum(rerun[q] for q in common) / len(common)
            return ProbationVerdict("rollback" if after < before else "keep", 0, 0, len(common), before, after, "")

        m.probation_verdict = probation_verdict
        sys.modules[m.__name__] = m
        installed.append(m.__name__)
    try:
        import harness.kernel.budget  # noqa: F401
    except ImportError:
        m = types.ModuleType("harness.kernel.budget")

        def edit_budget_at(i, total, start, end):
            if total <= 1:
                return start
            return round(start + (end - start) * i / (total - 1))

        m.edit_budget_at = edit_budget_at
        sys.modules[m.__name__] = m
        installed.append(m.__name__)
    return installed
