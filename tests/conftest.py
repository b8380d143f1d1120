"""Fixtures shared by the unit, browser and emulation tests.

`browser`: headless Chromium. It is skipped when missing, unless
BIGRAPH_REQUIRE_BROWSER=1 (set by CI's .ci/run), which turns a missing
browser into a failure, as BIGRAPH_REQUIRE_EMULATION does for the network.
"""
from __future__ import annotations

import os
import shutil

import pytest

from webtools import CHROMIUM_FLAGS, browser_missing


@pytest.fixture
def browser(tmp_path):
    """Headless Chromium driven by Selenium through Debian's chromedriver,
    with a new empty profile; quit in the end, also when the test fails."""
    reason = browser_missing()
    if reason:
        if os.environ.get("BIGRAPH_REQUIRE_BROWSER") == "1":
            pytest.fail(f"browser tests required but cannot run: {reason}")
        pytest.skip(reason)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in CHROMIUM_FLAGS + [f"--user-data-dir={tmp_path / 'chromium-profile'}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()
