"""The lead view (issue 30, item 5): what a lead reads of the review work, from the records the
console follows. Pure: the records come in as dicts, the time as an argument.

- queue sizes and oldest waits: the review feed's backlog (`ReviewQueue.backlog`), every queue;
- throughput: review.decisions records per reviewer in the last hour and the last day, by the
  decisions' own `ts` (a decision made with the command-line review counts too);
- second-review agreement per queue and reviewer pair:
`modstream.review.agreement.second_review_summary`
  over the review.tasks and review.decisions records held, as the demo summary counts it;
- the access log (review.access) searched by reviewer, content id and action, newest first.

What is held is bounded (the newest records of each topic), so a console that runs for weeks
keeps its memory; the figures say how many records they are drawn from.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from modstream.review.agreement import second_review_summary

HOUR_MS, DAY_MS = 3_600_000, 86_400_000
# (reviewer_id, queue, ts) -> whether a grant of the queue was in force (ReviewGrants.may).
Granted = Callable[[str, str, int], bool]
ACCESS_KEPT = 50_000  # review.access records held for the search
DECISIONS_KEPT = 100_000  # review.decisions records held for throughput and agreement
TASKS_KEPT = 100_000  # review.tasks records held for agreement (a second review names its first)
SEARCH_LIMIT = 200  # access records a search shows


@dataclass(frozen=True)
class AccessQuery:
    """A search of the access log: each field given must match exactly; none: everything."""

    reviewer_id: str = ""
    content_id: str = ""
    action: str = ""
    limit: int = SEARCH_LIMIT

    FIELDS = ("reviewer_id", "content_id", "action")

    @classmethod
    def of(cls, params: Mapping[str, str]) -> AccessQuery:
        """From a page's query string (unknown keys ignored, values cut to an id's length)."""
        reviewer_id, content_id, action = (
            str(params.get(name) or "").strip()[:256] for name in cls.FIELDS
        )
        return cls(reviewer_id, content_id, action)

    def matches(self, record: Mapping[str, Any]) -> bool:
        return all(
            not wanted or str(record.get(name) or "") == wanted
            for name, wanted in zip(self.FIELDS, self.terms(), strict=True)
        )

    def terms(self) -> tuple[str, str, str]:
        return (self.reviewer_id, self.content_id, self.action)

    def described(self) -> str:
        """The search in the access log's `detail` (what a lead looked for)."""
        shown = [f"{n}={v}" for n, v in zip(self.FIELDS, self.terms(), strict=True) if v]
        return " ".join(shown) or "all"


def search_access(records: Iterable[Mapping[str, Any]], query: AccessQuery) -> list[dict[str, Any]]:
    """The access records `query` matches, newest first (by `ts`, then arrival), at most
    `query.limit`."""
    ordered = sorted(enumerate(records), key=lambda pair: (pair[1]["ts"], pair[0]), reverse=True)
    found = (dict(record) for _, record in ordered if query.matches(record))
    return [record for _, record in zip(range(query.limit), found, strict=False)]


def throughput(decisions: Iterable[Mapping[str, Any]], now_ms: int) -> list[dict[str, Any]]:
    """Per reviewer: decisions in the hour and the day before `now_ms` (each decision once, by
    `event_id`); the busiest first. Reviewers with none in the day are left out."""
    hour, day = Counter[str](), Counter[str]()
    seen: set[str] = set()
    for decision in decisions:
        if decision["event_id"] in seen:
            continue
        seen.add(decision["event_id"])
        age = now_ms - int(decision["ts"])
        if 0 <= age < DAY_MS:
            day[decision["reviewer_id"]] += 1
            hour[decision["reviewer_id"]] += age < HOUR_MS
    rows = [{"reviewer_id": r, "last_hour": hour[r], "last_day": n} for r, n in day.items()]
    return sorted(rows, key=lambda row: (-row["last_day"], -row["last_hour"], row["reviewer_id"]))


def backlog_rows(backlog: Mapping[str, Mapping[str, int]]) -> list[dict[str, Any]]:
    """Every queue of the feed with its waiting tasks and oldest wait; the longest wait first."""
    rows = [{"queue": queue, **figures} for queue, figures in backlog.items()]
    return sorted(rows, key=lambda row: (-row["oldest_age_ms"], row["queue"]))


@dataclass
class ReviewActivity:
    """The newest records of review.tasks, review.decisions and review.access the console read
    (each bounded), and the lead view's figures over them. Followers add from their threads;
    the page reads from another, so every access holds the lock."""

    tasks: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)
    decisions: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=DECISIONS_KEPT))
    access: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=ACCESS_KEPT))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add_task(self, task: Mapping[str, Any]) -> None:
        with self._lock:
            self.tasks[str(task["task_id"])] = dict(task)
            self.tasks.move_to_end(str(task["task_id"]))
            while len(self.tasks) > TASKS_KEPT:
                self.tasks.popitem(last=False)

    def add_decision(self, decision: Mapping[str, Any]) -> None:
        with self._lock:
            self.decisions.append(dict(decision))

    def add_access(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            self.access.append(dict(record))

    def view(self, now_ms: int, query: AccessQuery, granted: Granted) -> dict[str, Any]:
        """Throughput, agreement and the access search at `now_ms` (the queues come from the
        review feed, not from here). Decisions count only on a task held here whose queue the
        reviewer was granted at the decision's `ts` (`granted`, the grants the job applies):
        one the job refused as ungranted is not work done."""
        with self._lock:
            tasks, held = list(self.tasks.values()), list(self.decisions)
            access = list(self.access)
        queue_of = {task["task_id"]: task["queue"] for task in tasks}
        decisions = [
            d
            for d in held
            if d["task_id"] in queue_of
            and granted(d["reviewer_id"], queue_of[d["task_id"]], d["ts"])
        ]
        return {
            "throughput": throughput(decisions, now_ms),
            "agreement": second_review_summary(tasks, decisions),
            "access": search_access(access, query),
            "held": {"tasks": len(tasks), "decisions": len(decisions), "access": len(access)},
        }
