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
BATCH = 4  # the served --max-batch-sentences
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium installed (apt-get install chromium)")


@pytest.fixture(scope="module")
def served(trained_run, tmp_path_factory):
    """``ordo serve`` in a subprocess on a free loopback port; yields its base URL."""
    port = free_port()
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", "ordo", "serve", "--model", f"tiny={trained_run}", "--model", f"other={trained_run}",
             "--checkpoint", "last",
             "--port", str(port), "--max-sentence-tokens", "30", "--max-batch-sentences", str(BATCH)],
            stdout=handle, stderr=subprocess.STDOUT)
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


@needs_chromium
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


@pytest.fixture(scope="module")
def browser():
    """The system's Chromium under Playwright, shared by the tests below."""
    if CHROMIUM is None:
        pytest.skip("no Chromium installed (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, served):
    """A fresh page of the server, its model list loaded."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(served)
    page.wait_for_selector("#model-0 option[value=tiny]", state="attached")
    yield page
    context.close()


def api_translations(url, texts):
    """The API's translations of ``texts``, asked in requests within the server's limit."""
    out = []
    for start in range(0, len(texts), BATCH):
        answer = httpx.post(f"{url}/v1/translate", json={"text": texts[start:start + BATCH]}, timeout=60)
        out += answer.json()["translations"]
    return out


def test_more_lines_than_the_servers_limit_are_all_translated(page, served, small_test_sources):
    texts = [text for text in small_test_sources if len(text.split()) <= 12][:BATCH * 2 + 1]
    posts = []
    page.on("request", lambda request: posts.append(request) if request.url.endswith("/v1/translate") else None)
    page.fill("#sources", "\n".join(texts))
    page.click("#translate")
    page.wait_for_selector("#translations td.translation, #error:not([hidden])")
    assert page.locator("#error").is_hidden(), page.locator("#error").inner_text()
    assert page.locator("#translations td.translation").all_inner_texts() == api_translations(served, texts)
    assert len(posts) == 3
    page.locator("#translations tbody tr").nth(BATCH * 2).click()
    assert page.locator("#detail-0 h2").inner_text().endswith(f"sentence {BATCH * 2 + 1}")


def test_an_unreachable_server_and_an_empty_input_say_what_to_do(page):
    page.fill("#sources", "the red lazy hill dances .")
    page.click("#translate")
    page.wait_for_selector("#translations td.translation")
    assert page.locator("#status").inner_text() == "1 sentence translated"

    page.route("**/v1/translate", lambda route: route.abort("connectionrefused"))
    page.click("#translate")
    page.wait_for_selector("#error:not([hidden])")
    assert page.locator("#error").inner_text().startswith("Could not reach the server; is ordo serve still running?")
    page.unroute("**/v1/translate")

    page.fill("#sources", "  \n\n")
    page.click("#translate")
    assert page.locator("#error").inner_text() == "Paste at least one sentence."
    assert page.locator("#status").inner_text() == ""  # not the last run's "1 sentence translated"


def test_the_keyboard_translates_once_and_picks_a_sentence(page):
    page.evaluate("""() => {
        window.posts = 0;
        const send = window.fetch;
        window.fetch = (...args) => { if (String(args[0]).includes("/v1/translate")) window.posts += 1;
                                      return send(...args); };
    }""")
    held = []
    page.route("**/v1/translate", lambda route: held.append(route))
    page.fill("#references", "a reference .")
    page.fill("#sources", "the red lazy hill dances .\na green forest sang .")
    page.focus("#references")
    page.keyboard.press("Control+Enter")
    page.wait_for_function("() => document.getElementById('status').textContent.startsWith('Translating')")
    page.focus("#sources")
    page.keyboard.press("Control+Enter")  # while the first is under way
    assert page.evaluate("window.posts") == 1
    for _ in range(200):  # lets Playwright hand over the held request
        if held:
            break
        page.wait_for_function("() => true")
    held[0].continue_()
    page.wait_for_selector("#translations td.translation")
    assert page.evaluate("window.posts") == 1

    second = page.locator("#translations tbody tr").nth(1)
    second.focus()
    assert page.evaluate("document.activeElement.dataset.index") == "1"
    page.keyboard.press("Enter")
    assert page.locator("#detail-0 h2").inner_text().endswith("sentence 2")
    assert second.get_attribute("aria-current") == "true"


def test_the_page_and_its_links_fetch_nothing_from_another_host(page, served):
    requested = []
    page.context.on("request", lambda request: requested.append(request.url))
    page.context.route(lambda url: not url.startswith(served), lambda route: route.abort())
    page.reload()
    page.wait_for_selector("#model-0 option[value=tiny]", state="attached")
    page.fill("#sources", "the red lazy hill dances .")
    page.click("#translate")
    page.wait_for_selector("#translations td.translation")
    links = page.eval_on_selector_all("a[href]", "anchors => anchors.map((a) => a.href)")
    assert links
    for link in links:
        page.goto(link, wait_until="load")
    foreign = [url for url in requested if not url.startswith(served)]
    assert not foreign, f"fetched from elsewhere: {foreign}"


def test_with_two_models_an_error_names_the_model_and_the_status_counts_both(page, small_test_sources):
    """Before, the refusal of the second model's request read as the first's, and the status showed whichever
    model's count came last, out of one model's sentences."""
    def refuse_other(route):
        if route.request.post_data_json["model"] == "other":
            route.fulfill(status=413, content_type="application/json", body='{"detail": "too long for other"}')
        else:
            route.continue_()

    page.select_option("#model-1", "other")
    page.evaluate("""() => {
        const send = window.fetch;
        let release;
        window.held = new Promise((resolve) => { release = resolve; });
        window.release = release;
        window.fetch = async (url, options) => {
            if (String(url).includes("/v1/translate") && JSON.parse(options.body).model === "other") await window.held;
            return send(url, options);
        };
    }""")
    texts = [text for text in small_test_sources if len(text.split()) <= 12][:BATCH * 2 + 1]
    page.fill("#sources", "\n".join(texts))
    page.click("#translate")  # tiny goes through its three requests; other waits before its first
    page.wait_for_function(f"document.querySelector('#status').textContent.includes('{BATCH * 2} of {len(texts) * 2}')")
    page.evaluate("() => window.release()")
    page.wait_for_selector("#translations td.translation")
    assert page.locator("#status").inner_text() == f"{len(texts)} sentences translated"
    page.route("**/v1/translate", refuse_other)
    page.click("#translate")
    page.wait_for_selector("#error:not([hidden])")
    assert page.locator("#error").inner_text() == "other: The server refused the request (413): too long for other"
