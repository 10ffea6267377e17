"""The review console in a real browser (issue 30, must-show), against the real broker, Redis
and a live moderation job: a reviewer logs in, claims a task, sees the image (blurred; the
reveal is logged), decides BLOCK with the keyboard, and the job hides the version; a reviewer
without the queue's grant sees no task and is refused by the server when the request is forged,
and by the job when the decision is forged past the server.

Why the real stack: the console's grants are the review.grants records the job applies, its
claims and decisions are signed records the job must accept (a lease the job checks before the
decision), and "the version becomes hidden" is what the job commits to moderation.actions. The
enforce job is not run here (a third JVM on the suite's two cores): the hide is asserted on
moderation.actions, the enforcement path's input, whose application test_enforce.py covers.
Screenshots go to $MODSTREAM_CONSOLE_SCREENSHOTS (docs/review-console/ refreshes docs/REVIEW.md).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from PIL import Image

from modstream.config import LOCALHOST, PROJECT_ROOT, Settings
from modstream.console.accounts import Accounts
from tests.conftest import TEST_KEYRING, evidence, review_decision, upload
from tests.integration.conftest import Kafka, ModerationDeployment
from tests.integration.test_key_roles import grant, now_ms, refused, send, wait_decision

pytestmark = pytest.mark.integration

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
CAROL, DAVE = "console-carol", "console-dave"  # carol: queue adult; dave: queue text only
PASSWORDS = {CAROL: "carol-console-passphrase", DAVE: "dave-console-passphrase"}
CONSOLE_REDIS_DB = 7  # the console's review queue, this test's own (flushed first)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOCALHOST, 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.fail("chromium and chromedriver are missing: `make setup` installs them")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--window-size=1200,900", f"--user-data-dir={tmp_path / 'chromium'}",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def red_square(media: Path) -> tuple[Path, bytes]:
    media.mkdir(parents=True, exist_ok=True)
    out = io.BytesIO()
    picture = Image.new("RGB", (240, 160), (250, 240, 220))
    for left in range(0, 240, 40):  # stripes: a blur is visible on them
        picture.paste((200, 30, 40), (left, 0, left + 20, 160))
    picture.save(out, format="PNG")
    path = media / "console-upload.png"
    path.write_bytes(out.getvalue())
    return path, out.getvalue()


def start_console(
    tmp_path: Path, stack: Settings, deployment: ModerationDeployment, media: Path
) -> tuple[subprocess.Popen[bytes], str]:
    accounts = Accounts({})
    for reviewer, password in PASSWORDS.items():
        accounts = accounts.with_reviewer(reviewer, password)
    accounts.save(tmp_path / "accounts.json")
    port = free_port()
    redis_url = f"redis://{LOCALHOST}:{stack.redis_port}/{CONSOLE_REDIS_DB}"
    redis.Redis.from_url(redis_url).flushdb()
    env = {
        **os.environ,
        "MODSTREAM_REDIS__URL": redis_url,
        "MODSTREAM_MEDIA_ROOT": str(media),
        "MODSTREAM_CONSOLE_SECRET": "console-integration-secret",
    }
    command = [
        sys.executable, "-m", "modstream.cli", "review", "serve", "--port", str(port),
        "--prefix", deployment.prefix, "--accounts", str(tmp_path / "accounts.json"),
    ]  # fmt: skip
    log = open(tmp_path / "console.log", "wb")  # noqa: SIM115 (kept open for the process)
    process = subprocess.Popen(command, cwd=PROJECT_ROOT, env=env, stdout=log, stderr=log)
    base = f"http://{LOCALHOST}:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
                if json.load(response)["ready"]:
                    return process, base
        except OSError:
            pass
        assert process.poll() is None, (tmp_path / "console.log").read_text()[-3000:]
        assert time.monotonic() < deadline, "console not ready in 60 s"
        time.sleep(0.3)


def shot(driver: Any, name: str) -> None:
    """A screenshot for docs/REVIEW.md, where MODSTREAM_CONSOLE_SCREENSHOTS names a folder."""
    folder = os.environ.get("MODSTREAM_CONSOLE_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / f"{name}.png"))


def log_in(driver: Any, base: str, reviewer: str) -> None:
    from selenium.webdriver.common.by import By

    driver.delete_all_cookies()
    driver.get(f"{base}/login")
    driver.find_element(By.ID, "reviewer_id").send_keys(reviewer)
    driver.find_element(By.ID, "password").send_keys(PASSWORDS[reviewer])
    driver.find_element(By.ID, "sign-in").click()
    assert driver.find_element(By.ID, "reviewer").text == reviewer


def forged_post(driver: Any, path: str, body: str = "") -> int:
    """A POST the page's own script could make (the session's cookie and CSRF token): what a
    reviewer forging a request in their browser sends. The server's status."""
    script = """
        const done = arguments[arguments.length - 1];
        const token = document.querySelector('meta[name="csrf-token"]').content;
        fetch(arguments[0], {method: "POST", body: arguments[1], headers: {
            "X-CSRF-Token": token, "Content-Type": "application/x-www-form-urlencoded"}})
          .then((response) => done(response.status));
    """
    return int(driver.execute_async_script(script, path, body))


def review_task(kafka: Kafka, topics: dict[str, str], content_id: str) -> dict[str, Any]:
    values = kafka.wait_for(
        topics["review.tasks"], lambda vs: any(t["content_id"] == content_id for t in vs),
        timeout_s=90,
    )  # fmt: skip
    [task] = [t for t in values if t["content_id"] == content_id]
    return task


def test_a_reviewer_blocks_in_the_browser_and_an_ungranted_one_is_refused(
    kafka: Kafka,
    stack: Settings,
    start_job: Any,
    moderation_deployment: ModerationDeployment,
    browser: Any,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    topics = moderation_deployment.topics
    topics["review.access"] = f"{moderation_deployment.prefix}.review.access"
    kafka.create_topics([topics["review.access"]])
    job = start_job("moderation", *moderation_deployment.args)
    grant(kafka, topics, CAROL, ["adult"], TEST_KEYRING)
    grant(kafka, topics, DAVE, ["text"], TEST_KEYRING)
    media = tmp_path / "media"
    image, data = red_square(media)
    console, base = start_console(tmp_path, stack, moderation_deployment, media)
    try:
        job.wait_running()
        # An image the model finds mature: RESTRICT (age gate) and a task in queue adult.
        at, content_id = now_ms(), "console-1"
        version = upload(
            content_id, at=at, modality="image", mime_type="image/png", size_bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(), media_ref=image.as_uri(),
        )  # fmt: skip
        send(kafka, topics, "content.versions", version, TEST_KEYRING)
        for detector, scores in (
            ("media_check", {"malware": 0.0, "corrupt": 0.0, "mime_mismatch": 0.0}),
            ("nsfw_image", {"nsfw": 0.75}),
        ):
            result = evidence(
                content_id, at=at, detector=detector, model_version="m-1", scores=scores,
                event_id=f"det-{content_id}-{detector}", evidence_ref=image.as_uri(),
            )  # fmt: skip
            send(kafka, topics, "detector.results", result, TEST_KEYRING)
        task = review_task(kafka, topics, content_id)
        assert task["queue"] == "adult" and image.as_uri() in task["evidence"]

        # dave (granted text only) sees no task; forged claim and decision: refused.
        log_in(browser, base, DAVE)
        assert browser.find_element(By.ID, "no-queues").is_displayed()
        shot(browser, "no-grant")
        assert forged_post(browser, "/queues/adult/claim") == 403
        decide_path = f"/tasks/{task['task_id']}/decide"
        assert forged_post(browser, decide_path, "outcome=BLOCK&reason=") == 403
        # ... and a decision forged past the server (signed with dave's own key) by the job.
        forged = review_decision(
            event_id=f"rv-forged-{content_id}", task_id=task["task_id"], content_id=content_id,
            reviewer_id=DAVE, outcome="ALLOW", reason="", ts=now_ms(),
        )  # fmt: skip
        send(kafka, topics, "review.decisions", forged, TEST_KEYRING)
        assert refused(kafka, topics, forged["event_id"])["error_class"] == "signature"

        # carol: log in, claim, see the blurred image, reveal it, BLOCK with the keyboard.
        log_in(browser, base, CAROL)
        WebDriverWait(browser, 30).until(
            lambda d: d.refresh() or d.find_elements(By.CSS_SELECTOR, 'tr[data-queue="adult"]')
        )
        shot(browser, "queues")
        browser.find_element(By.CSS_SELECTOR, 'button.claim[data-queue="adult"]').click()
        assert browser.find_element(By.ID, "task-id").text == task["task_id"]
        picture = browser.find_element(By.ID, "evidence-0")
        loaded = "return arguments[0].complete && arguments[0].naturalWidth"
        WebDriverWait(browser, 10).until(lambda d: d.execute_script(loaded, picture) == 240)
        figure = browser.find_element(By.CSS_SELECTOR, "figure.evidence-image")
        assert "blurred" in figure.get_attribute("class")
        shot(browser, "task-blurred")
        browser.find_element(By.CSS_SELECTOR, "button.reveal").click()
        WebDriverWait(browser, 10).until(lambda d: "blurred" not in figure.get_attribute("class"))
        browser.find_element(By.ID, "note").send_keys("clear nudity on a comment")
        Select(browser.find_element(By.ID, "reason")).select_by_value("sexual_content")
        browser.execute_script("document.activeElement.blur()")  # the shortcuts: on the page
        ActionChains(browser).send_keys("b").perform()
        assert browser.find_element(By.ID, "outcome-BLOCK").is_selected()
        shot(browser, "task-revealed")
        ActionChains(browser).send_keys(Keys.ENTER).perform()
        WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.ID, "notice"))
        assert (
            f"Decided BLOCK on task {task['task_id']}" in browser.find_element(By.ID, "notice").text
        )

        wait_decision(kafka, topics, content_id, "review", "BLOCK")
        actions = [
            a for a in kafka.values(topics["moderation.actions"]) if a["content_id"] == content_id
        ]
        assert actions[-1]["visibility"] == "hidden", actions
        [decision] = [
            d for d in kafka.values(topics["review.decisions"])
            if d["content_id"] == content_id and d["reviewer_id"] == CAROL
        ]  # fmt: skip
        assert (decision["outcome"], decision["reason"]) == ("BLOCK", "sexual_content")
        assert decision["signature"].startswith("hmac-sha256:")
        access = [
            a for a in kafka.values(topics["review.access"]) if a.get("task_id") == task["task_id"]
        ]
        by_action = {(a["reviewer_id"], a["action"]) for a in access}
        assert {(CAROL, a) for a in ("claim", "view", "evidence", "reveal", "decide")} <= by_action
        assert (DAVE, "refused") in by_action
        [reveal] = [a for a in access if a["action"] == "reveal"]
        assert reveal["evidence_ref"] == image.as_uri()
        [decide] = [a for a in access if a["action"] == "decide"]
        assert decide["note"] == "clear nudity on a comment"
    finally:
        console.terminate()
        console.wait(timeout=30)
