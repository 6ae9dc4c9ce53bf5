"""Redraw ``docs/serve_page.png``: ``ordo serve`` on a Ja->En run, two test sentences and their references typed
into the page, a full-page screenshot at 1280 px wide through the system's Chromium (needs ``ordo[serve,browser]``,
``chromium`` and a CJK font such as Debian's ``fonts-noto-cjk``).

usage: python docs/serve_screenshot.py RUN_DIR [--checkpoint averaged] [--out docs/serve_page.png]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import time

import httpx
from playwright.sync_api import sync_playwright

SOURCES = ["彼女 は 私 たち の 隣 の 家 に す ん で い る 。", "あなた に 返事 を し よ う と し て い る ところ で す 。"]
REFERENCES = ["she lives next door to us .", "i 'm about to tell you the answer ."]
PORT = 8791


def serve(run_dir: str, checkpoint: str) -> subprocess.Popen:
    """``ordo serve`` on PORT, once it answers ``/healthz``."""
    process = subprocess.Popen([sys.executable, "-m", "ordo", "serve", "--model", f"ja-en={run_dir}", "--checkpoint",
                                checkpoint, "--port", str(PORT)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{PORT}/healthz", timeout=2).status_code == 200:
                return process
        except httpx.HTTPError:
            time.sleep(0.3)
    process.kill()
    raise SystemExit("ordo serve did not start")


def screenshot(out: str) -> None:
    """Type the sentences and references, translate, and save the whole page."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(f"http://127.0.0.1:{PORT}/")
        page.wait_for_selector("#model-0 option", state="attached")
        page.fill("#sources", "\n".join(SOURCES))
        page.fill("#references", "\n".join(REFERENCES))
        page.click("#translate")
        page.wait_for_selector("#translations td.translation")
        page.screenshot(path=out, full_page=True)
        browser.close()


def main() -> None:
    """Serve, draw, stop."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run")
    parser.add_argument("--checkpoint", default="averaged")
    parser.add_argument("--out", default="docs/serve_page.png")
    args = parser.parse_args()
    process = serve(args.run, args.checkpoint)
    try:
        screenshot(args.out)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)


if __name__ == "__main__":
    main()
