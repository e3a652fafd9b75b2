"""The run report and its charts as a person sees them (issue 17 item 5): rendered files opened in a real
headless Chromium, offline. The same checks on a real `dvc repro` and on `dvc plots show`'s page are in
test_dvc_pipeline.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.pipeline.render import write_reports
from harness.pipeline.summary import EpochSummary, GateDecision, RunSummary
from tests.support.browser import chromium, file_requests, offline_problems, open_page

TASK_TYPES = ("counting", "ocr|text", "spatial")


def _summary() -> RunSummary:
    epochs = tuple(EpochSummary(e, 0.5 + 0.05 * e, None, None, 0.5 + 0.05 * e, accepted=1, rejected=2, probation=0,
                                rollouts=300 + e, usd=0.0, true_val_acc=0.48 + 0.04 * e, true_test_acc=0.47 + 0.04 * e)
                   for e in (1, 2, 3))
    gates, paths = [], {}
    for e in (1, 2, 3):
        for s, task_type in enumerate(TASK_TYPES, start=1):
            run_id = f"r_e{e}_s{s}_gate_{task_type}"
            action = "accept" if (e + s) % 3 == 0 else "reject"
            log_es = [0.4 * i if action == "accept" else -0.2 * i for i in range(1, 9)]
            gates.append(GateDecision(e, s, task_type, action, "", log_es[-1], -0.5, 6, 2, 1, 8, 16, run_id))
            paths[run_id] = tuple((i + 1, v) for i, v in enumerate(log_es))
    gates.append(GateDecision(3, 3, "spatial", "skipped_cooldown", "cooldown", None, None, None, None, None, None, 0, None))
    holdout = ({"epoch": 0, "which": "base", "skills_version": "v0", "prompts_version": "v0", "n": 6, "hard_acc": 0.5},)
    purposes = {e: {"training batch": 40, "gate screen": 10, "gate": 200, "slow-update validation": 50 + e} for e in (1, 2, 3)}
    return RunSummary(run_name="view", benchmark="sim", epochs=epochs, gates=tuple(gates), holdout=holdout,
                      gate_paths=paths, accept_threshold=3.0, reject_threshold=-1.5, delivered={"skills_version": "v2"},
                      oracle_available=True, rollouts_by_purpose=purposes,
                      # the rows whose long labels wrapped and shifted six values beside the wrong labels (issue 28)
                      soft_calibration=(21652, -0.000822, 0.002462), usd_by_role={"editor": 0.0, "solver": 0.0},
                      parse_modes={"strict": 3, "none": 1})


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_reports(_summary(), tmp_path_factory.mktemp("reports"))


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory):
    with chromium(tmp_path_factory.mktemp("chromium-profile")) as d:
        yield d


def test_report_page_shows_three_charts_offline(rendered: dict[str, Path], driver) -> None:
    from selenium.webdriver.common.by import By

    page = open_page(driver, rendered["html"])
    assert offline_problems(page) == []
    assert file_requests(page) == [rendered["html"].resolve().as_uri()]  # the log works: it saw the page itself
    charts = {c.get_attribute("data-chart"): c for c in driver.find_elements(By.CSS_SELECTOR, "svg[data-chart]")}
    assert set(charts) == {"accuracy", "cost", "gate-evidence"}
    for name, chart in charts.items():
        assert chart.is_displayed() and chart.size["width"] > 300 and chart.size["height"] > 150, name
    # accuracy: measured, best, true val, true test; cost: one bar segment per epoch and purpose
    assert len(charts["accuracy"].find_elements(By.TAG_NAME, "polyline")) == 4
    assert len(charts["cost"].find_elements(By.CSS_SELECTOR, "rect[fill]:not([fill='white'])")) >= 3 * 4
    panels = charts["gate-evidence"].find_elements(By.CSS_SELECTOR, "g[data-panel]")
    assert sorted(p.get_attribute("data-panel") for p in panels) == sorted(TASK_TYPES)
    for panel in panels:  # three gates with an evidence path per task type, each drawn
        assert len(panel.find_elements(By.TAG_NAME, "polyline")) == 3, panel.get_attribute("data-panel")
        assert panel.rect["width"] > 100


def test_gate_section_is_a_per_task_type_summary_with_the_full_table_collapsed(rendered: dict[str, Path], driver) -> None:
    from selenium.webdriver.common.by import By

    open_page(driver, rendered["html"])
    summary_table = driver.find_element(By.XPATH, "//h3[text()='Per task type']/following-sibling::table[1]")
    rows = summary_table.find_elements(By.CSS_SELECTOR, "tbody tr")
    assert [r.find_elements(By.TAG_NAME, "td")[0].text for r in rows] == sorted(TASK_TYPES)
    spatial = [td.text for td in rows[-1].find_elements(By.TAG_NAME, "td")]
    assert spatial[:6] == ["spatial", "4", "1", "0", "2", "1"]  # gates, accepted, probation, rejected, skipped
    details = driver.find_element(By.TAG_NAME, "details")
    full = details.find_element(By.TAG_NAME, "table")
    assert details.get_attribute("open") is None and not full.is_displayed()
    details.find_element(By.TAG_NAME, "summary").click()
    assert full.is_displayed() and len(full.find_elements(By.CSS_SELECTOR, "tbody tr")) == 10


def test_each_chart_file_opens_on_its_own(rendered: dict[str, Path], driver) -> None:
    for kind, name in (("accuracy_chart", "accuracy"), ("gate_evidence_chart", "gate-evidence"), ("cost_chart", "cost")):
        page = open_page(driver, rendered[kind])
        assert offline_problems(page) == []
        assert page.js("return document.documentElement.getAttribute('data-chart')") == name
        box = page.js("const b = document.documentElement.getBBox(); return [b.width, b.height]")
        assert box[0] > 300 and box[1] > 150, (kind, box)


def test_markdown_report_links_the_chart_images(rendered: dict[str, Path]) -> None:
    md = rendered["markdown"].read_text()
    for chart in ("plots/accuracy.svg", "plots/cost.svg", "plots/gate_evidence.svg"):
        assert f"]({chart})" in md and (rendered["markdown"].parent / chart).is_file()
    assert "<details><summary>All 10 gate decisions</summary>" in md
    assert md.index("| task type | gates |") < md.index("<details>")


def test_summary_is_a_table_with_each_value_on_its_labels_row(rendered: dict[str, Path], driver) -> None:
    """The summary at the top is a table: every label is the header of its own row, that row holds the label's
    value (checked against the summary's own numbers) and label and value start at the same height, at a wide
    and at a narrow window, where long labels wrap."""
    from selenium.webdriver.common.by import By

    from harness.pipeline.render import _headline

    summary = _summary()
    m = summary.final_metrics()
    expected = {
        "run": "view", "benchmark": "sim", "epochs run": "3", "best validation accuracy": f"{m['best_val_acc']:.4f}",
        "test accuracy (delivered harness)": "—", "edits accepted / rejected / probation": "3 / 6 / 0",
        "answers with no readable choice (parse failure rate)": "0.2500", "rollouts": str(300 * 3 + 1 + 2 + 3),
        "USD": "0.0000", "soft score minus accuracy (calibration gap)": "-0.0008 ± 0.0025 over 21652 judged rollouts",
        "USD by role": "editor 0.0000, solver 0.0000", "delivered harness": "skills_version=v2",
    }
    try:
        for width in (1400, 640):
            driver.set_window_size(width, 1000)
            open_page(driver, rendered["html"])
            shown = {}
            for row in driver.find_elements(By.CSS_SELECTOR, "h1 + table.summary tbody tr"):
                label, value = row.find_element(By.TAG_NAME, "th"), row.find_element(By.TAG_NAME, "td")
                assert label.get_attribute("scope") == "row"
                assert label.rect["y"] == value.rect["y"], (width, label.text)  # the same line, visually
                assert value.rect["x"] >= label.rect["x"] + label.rect["width"] - 1, (width, label.text)  # beside it
                assert row.text.replace("\n", " ") == f"{label.text} {value.text}".replace("\n", " ")  # nothing else
                shown[label.text.replace("\n", " ")] = value.text
            assert list(shown) == [label for label, _ in _headline(summary)], width
            for label, value in expected.items():
                assert shown[label] == value, (width, label)
    finally:
        driver.set_window_size(1400, 1000)
