"""The web console in a real headless browser (Debian's chromium, driven by selenium).

``xdn console`` runs as its own process, as an administrator starts it; the browser signs in
with the printed one-time token, looks at the ontology, the policy, who gets what and the
audit report, then walks edit → diff → sign with the keyboard only (Tab, typing, Enter): the
draft is checked live as it is typed, the diff shows who gains what, and signing writes a
policy whose signature verifies. No page may log a browser error (a script failing, a Content
Security Policy violation). ``make chromium`` installs the browser and its driver.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.unit.console_fixtures import (
    ONTOLOGY,
    PUBLISHER,
    ConsoleWorld,
    bumped,
    console_world,
    without_deny,
)
from xdn import crypto
from xdn.ontology import load_ontology
from xdn.paths import REPO_ROOT
from xdn.policy import verify_policy_file

pytestmark = [pytest.mark.browser, pytest.mark.integration]

WAIT = 20.0  # seconds for a page or a live verdict, at most


@pytest.fixture
def world(tmp_path: Path) -> ConsoleWorld:
    made = console_world(tmp_path / "world")
    report = made.root / "audit" / "report.html"
    report.parent.mkdir()
    report.write_text(
        "<html><body><h1>xdn provenance audit</h1><p>Every chain verifies.</p></body></html>"
    )
    return made


@pytest.fixture
def console_url(world: ConsoleWorld) -> Iterator[str]:
    """``xdn console`` started as a user would; the address it printed, token included."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli",
            "console",
            "--listen",
            "127.0.0.1:0",
            "--policy",
            str(world.policy),
            "--key",
            f"{PUBLISHER}={world.key}",
            "--subscribers",
            str(world.subscribers),
            "--audit-report",
            str(world.root / "audit"),
        ],
        cwd=world.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the console prints its address once it listens
        found = re.search(r"open (http://\S+login\?token=\S+)", line)
        assert found, f"no address printed: {line!r} {proc.stderr.read() if proc.stderr else ''}"
        yield found[1]
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[WebDriver]:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver, "no chromium / chromedriver: run `make chromium`"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'chromium'}",
        "--window-size=1280,1000",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(service=Service(driver), options=options)
    try:
        yield session
    finally:
        session.quit()


def _until(browser: WebDriver, condition: Callable[[WebDriver], object]) -> None:
    WebDriverWait(browser, WAIT, poll_frequency=0.05).until(condition)


def _keys(browser: WebDriver, *keys: str) -> None:
    ActionChains(browser).send_keys(*keys).perform()


def _tab_to(browser: WebDriver, element_id: str, limit: int = 40) -> None:
    """Press Tab until the element ``element_id`` has the focus."""
    for _ in range(limit):
        if browser.switch_to.active_element.get_attribute("id") == element_id:
            return
        _keys(browser, Keys.TAB)
    raise AssertionError(f"Tab never reached #{element_id}")


def _replace_text(browser: WebDriver, text: str) -> None:
    """Select all of the focused field and type ``text`` over it."""
    ActionChains(browser).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).perform()
    _keys(browser, Keys.DELETE, text)


def _verdict(browser: WebDriver, state: str, words: str) -> None:
    def shown(b: WebDriver) -> bool:
        verdict = b.find_element(By.ID, "verdict")
        return verdict.get_attribute("data-state") == state and words in verdict.text

    _until(browser, shown)


def _no_errors(browser: WebDriver) -> None:
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not severe, severe


def test_pages_then_a_keyboard_only_edit_diff_and_sign(
    world: ConsoleWorld, console_url: str, browser: WebDriver
) -> None:
    base = console_url.split("login?")[0]
    browser.get(console_url)
    _until(browser, lambda b: b.current_url == base)
    assert browser.find_element(By.TAG_NAME, "h1").text == "xdn console"

    browser.get(base + "ontology")
    concepts = {
        e.get_attribute("data-concept")
        for e in browser.find_elements(By.CSS_SELECTOR, "figure.dag svg text")
    }
    assert concepts == set(load_ontology([ONTOLOGY]).concepts)
    browser.get(base + "who")
    assert "MachineSetting" in browser.find_element(By.XPATH, "//tr[td/a='alice']").text
    browser.get(base + "audit")
    browser.find_element(By.LINK_TEXT, "Open the report").click()
    assert "Every chain verifies." in browser.find_element(By.TAG_NAME, "body").text
    _no_errors(browser)

    # Keyboard only from here: Tab to the editor, type, Tab to a button, Enter.
    browser.get(base + f"policies/{PUBLISHER}")
    _tab_to(browser, "draft")
    _replace_text(browser, "[policy\n")
    _verdict(browser, "error", "line 1")
    assert browser.find_element(By.ID, "draft").get_attribute("aria-invalid") == "true"
    draft = without_deny(bumped(world.policy.read_text(), 2))
    _replace_text(browser, draft)
    _verdict(browser, "ok", "Valid: version 2")
    _tab_to(browser, "show-diff")
    _keys(browser, Keys.ENTER)
    _until(browser, lambda b: "Diff of" in b.find_element(By.TAG_NAME, "h1").text)
    gains = browser.find_element(By.XPATH, "//table[caption='known subscribers']//tr[td='carl']")
    assert gains.text == "carl MachineSetting —"
    assert "removed C2: deny MachineSetting" in browser.find_element(By.TAG_NAME, "main").text
    _tab_to(browser, "sign")
    _keys(browser, Keys.ENTER)
    _until(browser, lambda b: "Signed version 2" in b.find_element(By.TAG_NAME, "main").text)
    _no_errors(browser)

    assert world.policy.read_text() == draft
    key = crypto.load_private_key_pem(world.key.read_bytes())
    assert verify_policy_file(world.policy, key.public_key()) == draft.encode()
