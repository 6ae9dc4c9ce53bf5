"""The page of ``ordo serve`` in a real browser (the system's Chromium, driven by Playwright): a sentence typed
in gets its translation, its heat map has one row per target token and one column per source token, and an
over-long input shows the server's refusal. A screenshot is saved in the test's tmp folder."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

httpx = pytest.importorskip("httpx", reason="ordo[serve] is not installed")
pytest.importorskip("fastapi", reason="ordo[serve] is not installed")
sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright's Python package is not installed")
from serve_helpers import free_port

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def served(trained_run, tmp_path_factory):
    """``ordo serve`` in a subprocess on a free loopback port; yields its base URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "ordo", "serve", "--model", f"tiny={trained_run}", "--checkpoint", "last",
             "--port", str(port), "--max-sentence-tokens", "30"], stdout=handle, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "ordo serve did not answer within 120 s"
        time.sleep(0.2)
    yield url
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.kill(process.pid, signal.SIGKILL)


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install chromium)")
def test_the_page_translates_draws_the_heat_map_and_shows_a_refusal(served, tmp_path):
    sentence, cjk = "the red lazy hill dances .", "中文 测试"
    expected = httpx.post(f"{served}/v1/translate", json={"text": [sentence, cjk], "return_attention": True},
                          timeout=60).json()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(served)
        page.wait_for_selector("#model-0 option[value=tiny]", state="attached")
        page.fill("#sources", f"{sentence}\n{cjk}")
        page.click("#translate")
        page.wait_for_selector("#translations td.translation")
        shown = page.locator("#translations td.translation").all_inner_texts()
        assert shown == expected["translations"]
        first = expected["sentences"][0]
        rows = page.locator("#heatmap-0 tbody tr")
        assert rows.count() == len(first["target_tokens"]) > 0
        for index in range(rows.count()):
            assert rows.nth(index).locator("td.cell").count() == len(first["source_tokens"])
        assert page.locator("#heatmap-0 thead th").count() == len(first["source_tokens"]) + 1
        assert page.locator("#detail-0 line.link").count() > 0
        assert page.locator("#detail-0 [data-figure^=Kendall]").inner_text()
        page.screenshot(path=str(tmp_path / "page.png"), full_page=True)
        page.locator("#translations tbody tr").nth(1).click()  # the CJK sentence
        assert page.locator("#detail-0 .source-word").all_text_contents() == ["中文", "测试"]
        assert page.locator("#error").is_hidden()

        page.fill("#sources", " ".join(["word"] * 40))
        page.click("#translate")
        page.wait_for_selector("#error:not([hidden])")
        error = page.locator("#error").inner_text()
        assert "(413)" in error and "max_sentence_tokens=30" in error
        page.screenshot(path=str(tmp_path / "refusal.png"))
        browser.close()
    assert (tmp_path / "page.png").stat().st_size > 0
