"""The review console in a real browser (issue 30, must-show), against the real broker, Redis,
a live moderation job and a live enforce job: a reviewer logs in, claims a task, sees the image
(blurred; the reveal is logged) and the words OCR read in it (from the raw-output store),
decides BLOCK with the keyboard, and the version's visibility becomes `hidden` through the
enforcement path; a reviewer without the queue's grant sees no task and is refused by the
server when the request is forged, and by the job when the decision is forged past the server.

Why the real stack: the console's grants are the review.grants records the job applies, its
claims and decisions are signed records the job must accept (a lease the job checks before the
decision), and "the version becomes hidden" is what the enforce job (modstream/jobs/enforce.py, the
production job, run as its own process like every job here) applies to the platform's store
(the reference Content Service on Redis) and reports on content.visibility from the actions
the moderation job commits. Screenshots go to $MODSTREAM_CONSOLE_SCREENSHOTS
(docs/review-console/ refreshes docs/REVIEW.md).
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
from PIL import Image, ImageDraw, ImageFont

from modstream.console.accounts import Accounts
from modstream.core.config import LOCALHOST, PROJECT_ROOT, Settings
from modstream.detectors.raw_output import RawOutputStore
from modstream.enforcement.content_service import ContentService
from modstream.testing.live import grant, now_ms, refused, send, wait_decision
from modstream.testing.records import TEST_KEYRING, appeal_record, evidence, review_decision, upload
from modstream.testing.stack import Kafka, ModerationDeployment

pytestmark = pytest.mark.integration

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
# carol: queue adult; erin: adult and appeals; dave: queue text only; lena: a lead, no queue.
CAROL, ERIN, DAVE, LENA = "console-carol", "console-erin", "console-dave", "console-lena"
PASSWORDS = {
    CAROL: "carol-console-passphrase",
    ERIN: "erin-console-passphrase",
    DAVE: "dave-console-passphrase",
    LENA: "lena-console-passphrase",
}
LEASE_MS = 6_000  # the console's claims, short: another reviewer gets an abandoned task
# The console's review queue and the platform's store the enforce job applies to (the
# reference Content Service's `content:<id>` hashes): this test's own database, flushed first.
CONSOLE_REDIS_DB = 7
READ_IN_IMAGE = "CONSOLE TEST CARD"  # what OCR read in console-1's image (its kept raw output)


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


def striped_image(media: Path) -> tuple[Path, bytes]:
    media.mkdir(parents=True, exist_ok=True)
    out = io.BytesIO()
    picture = Image.new("RGB", (240, 160), (250, 240, 220))
    for left in range(0, 240, 40):  # stripes: a blur is visible on them
        picture.paste((200, 30, 40), (left, 0, left + 20, 160))
    ImageDraw.Draw(picture).text(
        (16, 66), READ_IN_IMAGE, fill="black", font=ImageFont.load_default(size=20)
    )  # the words the test's OCR result says were read (raw output kept in mature_image)
    picture.save(out, format="PNG")
    path = media / "console-upload.png"
    path.write_bytes(out.getvalue())
    return path, out.getvalue()


def console_redis_url(stack: Settings) -> str:
    return f"redis://{LOCALHOST}:{stack.redis_port}/{CONSOLE_REDIS_DB}"


def start_enforce(
    kafka: Kafka, stack: Settings, start_job: Any, deployment: ModerationDeployment, tmp_path: Path
) -> Any:
    """The enforce job (modstream/jobs/enforce.py, as deployed) on the run's moderation.actions,
    applying to the Content Service in this test's Redis database and media folder `platform`."""
    topics, prefix = deployment.topics, deployment.prefix
    for name in ("content.visibility", "enforcement.repairs"):
        topics[name] = f"{prefix}.{name}"
    kafka.create_topics([topics["content.visibility"], topics["enforcement.repairs"]])
    args = [
        "--checkpoint-dir", str(tmp_path / "enforce-ckpt"), "--checkpoint-interval-ms", "1000",
        "--transactional-id-prefix", f"{prefix}-enforce", "--group-id", f"{prefix}-enforce",
        "--bootstrap-servers", stack.bootstrap_servers, "--media-dir", str(tmp_path / "platform"),
    ]  # fmt: skip
    for name in ("moderation.actions", "enforcement.repairs", "content.visibility"):
        args += ["--topic", f"{name}={topics[name]}"]
    args += ["--topic", f"moderation.dlq={topics['moderation.dlq']}"]
    return start_job("enforce", *args, env={"MODSTREAM_REDIS__URL": console_redis_url(stack)})


def start_console(
    tmp_path: Path, stack: Settings, deployment: ModerationDeployment, media: Path
) -> tuple[subprocess.Popen[bytes], str]:
    accounts = Accounts({})
    for reviewer, password in PASSWORDS.items():
        accounts = accounts.with_reviewer(reviewer, password)
    accounts.with_lead(LENA).save(tmp_path / "accounts.json")
    port = free_port()
    redis_url = console_redis_url(stack)
    redis.Redis.from_url(redis_url).flushdb()
    env = {
        **os.environ,
        "MODSTREAM_REDIS__URL": redis_url,
        "MODSTREAM_MEDIA_ROOT": str(media),
        "MODSTREAM_CONSOLE_SECRET": "console-integration-secret",
    }
    command = [
        sys.executable, "-m", "modstream.cli.main", "review", "serve", "--port", str(port),
        "--prefix", deployment.prefix, "--accounts", str(tmp_path / "accounts.json"),
        "--lease-ms", str(LEASE_MS), "--raw-output-dir", str(tmp_path / "raw-output"),
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
    from selenium.webdriver.support.ui import WebDriverWait

    driver.delete_all_cookies()
    driver.get(f"{base}/login")
    driver.find_element(By.ID, "reviewer_id").send_keys(reviewer)
    driver.find_element(By.ID, "password").send_keys(PASSWORDS[reviewer])
    driver.find_element(By.ID, "sign-in").click()
    # scrypt takes its time on a busy machine: wait for the next page, not the click
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.ID, "reviewer"))
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


def mature_image(
    kafka: Kafka,
    topics: dict[str, str],
    content_id: str,
    image: Path,
    data: bytes,
    platform: ContentService,
    raw_outputs: RawOutputStore,
) -> None:
    """An image the model finds mature: RESTRICT (age gate) and a task in queue adult. The
    platform has the upload (pending until an action applies); OCR read READ_IN_IMAGE in it,
    kept in `raw_outputs` as the scan job keeps a reader's words."""
    at = now_ms()
    platform.upload(content_id, 1, data, at)
    version = upload(
        content_id, at=at, modality="image", mime_type="image/png", size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(), media_ref=image.as_uri(),
    )  # fmt: skip
    send(kafka, topics, "content.versions", version, TEST_KEYRING)
    for detector, scores in (
        ("media_check", {"malware": 0.0, "corrupt": 0.0, "mime_mismatch": 0.0}),
        ("nsfw_image", {"nsfw": 0.75}),
        ("ocr_text", {"offensive": 0.01}),
    ):
        result = evidence(
            content_id, at=at, detector=detector, model_version="m-1", scores=scores,
            event_id=f"det-{content_id}-{detector}", evidence_ref=image.as_uri(),
        )  # fmt: skip
        if detector == "ocr_text":
            read = [{"text": READ_IN_IMAGE, "confidence": 0.97, "box": [12, 60, 228, 96]}]
            result["findings"] = [{"offensive": 0.01, "confidence": 0.97, "box": read[0]["box"]}]
            result["raw_output_ref"] = raw_outputs.keep(result, read)
        send(kafka, topics, "detector.results", result, TEST_KEYRING)


def claim(driver: Any, base: str, queue: str, timeout_s: float = 30) -> str:
    """Claim the next task of `queue` from the queues page, retrying while it has none (not
    fed yet, or leased); the task id the page shows."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def claimed(d: Any) -> bool:
        d.get(f"{base}/")
        buttons = d.find_elements(By.CSS_SELECTOR, f'button.claim[data-queue="{queue}"]')
        if not buttons:
            return False
        buttons[0].click()
        return bool(d.find_elements(By.ID, "task-id"))

    WebDriverWait(driver, timeout_s, poll_frequency=1).until(claimed)
    return str(driver.find_element(By.ID, "task-id").text)


def image_shown(driver: Any) -> bool:
    """The first evidence image loaded through the console (its natural width)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    picture = driver.find_element(By.ID, "evidence-0")
    loaded = "return arguments[0].complete && arguments[0].naturalWidth"
    WebDriverWait(driver, 10).until(lambda d: d.execute_script(loaded, picture) == 240)
    return True


def decide_by_keyboard(driver: Any, key: str, reason: str, note: str) -> str:
    """Choose the outcome by its key, the reason, a note, no next task; Enter; the notice."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    driver.find_element(By.ID, "note").send_keys(note)
    if reason:
        Select(driver.find_element(By.ID, "reason")).select_by_value(reason)
    driver.find_element(By.NAME, "next").click()  # off: back to the queues
    driver.execute_script("document.activeElement.blur()")  # the shortcuts act on the page
    ActionChains(driver).send_keys(key).perform()
    if key == "b":
        shot(driver, "task-revealed")
    ActionChains(driver).send_keys(Keys.ENTER).perform()
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.ID, "notice"))
    return str(driver.find_element(By.ID, "notice").text)


def test_reviewers_decide_in_the_browser_and_an_ungranted_one_is_refused(
    kafka: Kafka,
    stack: Settings,
    start_job: Any,
    moderation_deployment: ModerationDeployment,
    browser: Any,
    tmp_path: Path,
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    topics = moderation_deployment.topics
    topics["review.access"] = f"{moderation_deployment.prefix}.review.access"
    kafka.create_topics([topics["review.access"]])
    job = start_job("moderation", *moderation_deployment.args)
    grant(kafka, topics, CAROL, ["adult"], TEST_KEYRING)
    grant(kafka, topics, ERIN, ["adult", "appeals"], TEST_KEYRING)
    grant(kafka, topics, DAVE, ["text"], TEST_KEYRING)
    media = tmp_path / "media"
    image, data = striped_image(media)
    console, base = start_console(tmp_path, stack, moderation_deployment, media)
    platform = ContentService(redis.Redis.from_url(console_redis_url(stack)), tmp_path / "platform")
    raw_outputs = RawOutputStore(tmp_path / "raw-output")
    try:
        job.wait_running()
        # Started once the moderation job runs: its JVM starts while the browser works (it reads
        # moderation.actions from the beginning), not beside the moderation job's start.
        enforce = start_enforce(kafka, stack, start_job, moderation_deployment, tmp_path)
        for content_id in ("console-1", "console-2"):
            mature_image(kafka, topics, content_id, image, data, platform, raw_outputs)
        tasks = {cid: review_task(kafka, topics, cid) for cid in ("console-1", "console-2")}
        assert {t["queue"] for t in tasks.values()} == {"adult"}
        assert image.as_uri() in tasks["console-1"]["evidence"]
        by_id = {task["task_id"]: task for task in tasks.values()}

        # dave (granted text only) sees no task; forged claim and decision: refused.
        log_in(browser, base, DAVE)
        assert browser.find_element(By.ID, "no-queues").is_displayed()
        shot(browser, "no-grant")
        assert forged_post(browser, "/queues/adult/claim") == 403
        some = tasks["console-1"]
        assert forged_post(browser, f"/tasks/{some['task_id']}/decide", "outcome=BLOCK") == 403
        # ... and a decision forged past the server (signed with dave's own key) by the job.
        forged = review_decision(
            event_id="rv-forged-console-1", task_id=some["task_id"], content_id="console-1",
            reviewer_id=DAVE, outcome="ALLOW", reason="", ts=now_ms(),
        )  # fmt: skip
        send(kafka, topics, "review.decisions", forged, TEST_KEYRING)
        assert refused(kafka, topics, forged["event_id"])["error_class"] == "signature"

        # carol: claim, the image blurred, reveal it, BLOCK by keyboard: the version is hidden.
        log_in(browser, base, CAROL)
        WebDriverWait(browser, 30).until(
            lambda d: d.refresh() or d.find_elements(By.CSS_SELECTOR, 'tr[data-queue="adult"]')
        )
        shot(browser, "queues")
        blocked = by_id[claim(browser, base, "adult")]
        assert image_shown(browser)
        figure = browser.find_element(By.CSS_SELECTOR, "figure.evidence-image")
        assert "blurred" in figure.get_attribute("class")
        WebDriverWait(browser, 30, poll_frequency=1).until(
            lambda d: READ_IN_IMAGE in d.page_source or d.refresh()
        )  # the words OCR read, from the raw output (the console reads detector.results live)
        figure = browser.find_element(By.CSS_SELECTOR, "figure.evidence-image")
        assert image_shown(browser)
        row = browser.find_element(By.CSS_SELECTOR, '#media-text tr[data-detector="ocr_text"]')
        assert READ_IN_IMAGE in row.text and "0.97" in row.text
        shot(browser, "task-blurred")
        browser.find_element(By.CSS_SELECTOR, "button.reveal").click()
        WebDriverWait(browser, 10).until(lambda d: "blurred" not in figure.get_attribute("class"))
        notice = decide_by_keyboard(browser, "b", "sexual_content", "clear nudity on a comment")
        assert f"Decided BLOCK on task {blocked['task_id']}" in notice
        wait_decision(kafka, topics, blocked["content_id"], "review", "BLOCK")
        enforce.wait_running()
        assert_enforced(kafka, topics, platform, blocked["content_id"], "hidden")

        # carol claims the other task and leaves it; once her lease ran out, erin gets it.
        abandoned = by_id[claim(browser, base, "adult")]
        assert abandoned != blocked
        log_in(browser, base, ERIN)
        assert claim(browser, base, "adult", timeout_s=LEASE_MS / 1000 + 30) == abandoned["task_id"]
        decide_by_keyboard(browser, "a", "", "not nudity: a striped test card")
        wait_decision(kafka, topics, abandoned["content_id"], "review", "ALLOW")
        assert_enforced(kafka, topics, platform, abandoned["content_id"], "public")

        # The author appeals the BLOCK: erin sees the appealed decision's evidence.
        revision = max(
            d["decision_revision"] for d in kafka.values(topics["moderation.decisions"])
            if d["content_id"] == blocked["content_id"]
        )  # fmt: skip
        appeal = appeal_record(
            event_id="ap-console", appeal_id="a-console", content_id=blocked["content_id"],
            decision_revision=revision, ts=now_ms(),
        )  # fmt: skip
        send(kafka, topics, "moderation.appeals", appeal, TEST_KEYRING)
        assert claim(browser, base, "appeals", timeout_s=90) == "appeal-a-console"
        assert "The appealed decision's evidence" in browser.page_source
        assert image_shown(browser)
        shot(browser, "appeal")

        assert_access_log(kafka, topics, blocked, abandoned, image)
        assert_lead_view(browser, base, blocked, image)
    finally:
        console.terminate()
        console.wait(timeout=30)


def assert_enforced(
    kafka: Kafka, topics: dict[str, str], platform: ContentService, content_id: str, seen: str
) -> None:
    """The enforce job applied the reviewer's decision: the platform's store serves the version
    as `seen` at the decision's revision (the age gate the model's RESTRICT applied before it
    replaced), and content.visibility reports it."""
    [action] = [
        a for a in kafka.wait_for(
            topics["moderation.actions"],
            lambda vs: any(a["content_id"] == content_id and a["visibility"] == seen for a in vs),
        ) if a["content_id"] == content_id and a["visibility"] == seen
    ]  # fmt: skip
    values = kafka.wait_for(
        topics["content.visibility"],
        lambda vs: any(
            (v["content_id"], v["decision_revision"], v["visibility"])
            == (content_id, action["decision_revision"], seen)
            for v in vs
        ),
        timeout_s=90,
    )  # fmt: skip
    reported = [v["visibility"] for v in values if v["content_id"] == content_id]
    assert "limited" in reported and reported[-1] == seen, reported
    served = platform.effective(content_id, now_ms())
    assert served is not None and served.visibility == seen
    assert served.decision_revision == action["decision_revision"]
    assert platform.is_exported(content_id, 1) == (seen == "public")


def assert_lead_view(driver: Any, base: str, blocked: dict[str, Any], image: Path) -> None:
    """The lead finds carol's reveal in the access log and sees her decision counted, not
    dave's forged one (signed, but without a grant: the job refused it)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    log_in(driver, base, LENA)
    driver.find_element(By.ID, "lead-link").click()
    search = f"{base}/lead?reviewer_id={CAROL}&action=reveal"
    reveal = f'tr[data-action="reveal"][data-reviewer="{CAROL}"]'
    WebDriverWait(driver, 30, poll_frequency=1).until(
        lambda d: d.get(search) or d.find_elements(By.CSS_SELECTOR, reveal)
    )  # the console reads review.access as it is written
    [row] = driver.find_elements(By.CSS_SELECTOR, reveal)
    assert blocked["task_id"] in row.text and image.as_uri() in row.text
    counted = driver.find_element(By.CSS_SELECTOR, f'#throughput tr[data-reviewer="{CAROL}"]')
    assert counted.text.split()[-1] != "0"
    assert not driver.find_elements(By.CSS_SELECTOR, f'#throughput tr[data-reviewer="{DAVE}"]')
    driver.execute_script("document.getElementById('throughput').scrollIntoView()")
    shot(driver, "lead")


def assert_access_log(
    kafka: Kafka,
    topics: dict[str, str],
    blocked: dict[str, Any],
    abandoned: dict[str, Any],
    image: Path,
) -> None:
    """Who saw, revealed, claimed and decided what; dave's refusals; carol's private note."""
    access = kafka.values(topics["review.access"])
    of_blocked = [a for a in access if a.get("task_id") == blocked["task_id"]]
    seen = {(a["reviewer_id"], a["action"]) for a in of_blocked}
    assert {(CAROL, a) for a in ("claim", "view", "evidence", "reveal", "decide")} <= seen
    assert (CAROL, "raw_output") in seen  # the words OCR read, read from the store
    [reveal] = [a for a in of_blocked if a["action"] == "reveal"]
    assert reveal["evidence_ref"] == image.as_uri()
    [decide] = [a for a in of_blocked if a["action"] == "decide"]
    assert (decide["outcome"], decide["note"]) == ("BLOCK", "clear nudity on a comment")
    refusals = [a for a in access if a["reviewer_id"] == DAVE and a["action"] == "refused"]
    assert len(refusals) == 2 and all("no grant" in a["detail"] for a in refusals)
    claims = [a["reviewer_id"] for a in access if a.get("task_id") == abandoned["task_id"]]
    assert claims.count(CAROL) >= 1 and (ERIN in claims)
    [decision] = [
        d for d in kafka.values(topics["review.decisions"])
        if d["task_id"] == blocked["task_id"] and d["reviewer_id"] == CAROL
    ]  # fmt: skip
    assert (decision["outcome"], decision["reason"]) == ("BLOCK", "sexual_content")
    assert "note" not in decision and decision["signature"].startswith("hmac-sha256:")
