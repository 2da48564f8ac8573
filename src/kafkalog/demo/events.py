"""Step 1a: the page-view generator (deterministic; needs neither Spark nor the storage engine)."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import accumulate

from kafkalog.demo.settings import BATCH_PERIOD_MS, HOUR_MS, MINUTE_MS, SEED, START_MS

DEVICES = (("mobile", 55), ("desktop", 38), ("tablet", 7))

# Pages a visitor browses to, with their popularity. The checkout pages are reached only from the
# cart, and the spring-sale post mostly from the newsletter.
BROWSE_PAGES = (
    ("/", 18), ("/search", 9), ("/products", 8),
    ("/products/trail-runner", 6), ("/products/city-sneaker", 5), ("/products/rain-jacket", 4),
    ("/products/wool-socks", 3), ("/products/day-pack", 3), ("/products/water-bottle", 2),
    ("/products/headlamp", 2), ("/products/gift-card", 1),
    ("/cart", 4), ("/blog", 3), ("/blog/trail-guide", 2), ("/blog/packing-list", 1.5),
    ("/blog/spring-sale", 0.5), ("/stores", 1.5), ("/help", 2), ("/account", 3), ("/about", 1),
)
SALE_PAGES = ("/products/trail-runner", "/products/rain-jacket", "/products/day-pack", "/products/headlamp")
CHECKOUT_DONE = "/checkout/done"

# Where sessions come from (the Referer of their first view) and where each source lands.
_SEARCH_LANDING = {"/": 3, "/products/trail-runner": 2, "/products/city-sneaker": 2,
                   "/products/rain-jacket": 1, "/blog/trail-guide": 1, "/stores": 1}
SOURCES = (
    ("google.com", 38, _SEARCH_LANDING),
    ("direct", 25, {"/": 6, "/account": 1, "/cart": 1}),
    ("instagram.com", 9, {"/products/city-sneaker": 2, "/blog/packing-list": 1, "/": 1}),
    ("facebook.com", 6, {"/": 2, "/products/wool-socks": 1, "/blog/packing-list": 1}),
    ("bing.com", 5, _SEARCH_LANDING),
    ("reddit.com", 4, {"/blog/trail-guide": 3, "/products/headlamp": 1}),
    ("newsletter", 2, {"/blog/spring-sale": 1}),
)
NEWSLETTER_SHARE = 0.08  # of the sessions of the batch period, arriving after the newsletter
NEWSLETTER_DECAY_MS = 15 * MINUTE_MS
RETURNING = "(returning)"  # the source of a session that began by coming back to an open tab
# Mean time on page in seconds, by page or by section ("/blog/" covers every post).
TIME_ON_PAGE_S = {"/": 20, "/search": 15, "/products": 25, "/products/": 55, "/cart": 30, "/checkout": 75,
                  CHECKOUT_DONE: 10, "/blog": 20, "/blog/": 95, "/help": 60}


@dataclass(frozen=True, slots=True)
class PageView:
    """One page view. ``timestamp`` (epoch ms) is also the Kafka record's timestamp (CreateTime):
    the event time travels in the record's timestamp field, not in the JSON value."""

    timestamp: int
    user_id: str
    page: str
    referrer: str  # an external domain or "direct" for a session's first view, else the previous page
    device: str
    duration_ms: int  # time on page

    def key(self) -> bytes:
        return self.user_id.encode()

    def value(self) -> bytes:
        return json.dumps({"user_id": self.user_id, "page": self.page, "referrer": self.referrer,
                           "device": self.device, "duration_ms": self.duration_ms},
                          separators=(",", ":")).encode()


def _cumulative(weights: Sequence[float]) -> list[float]:
    return list(accumulate(weights))


_BROWSE = [p for p, _ in BROWSE_PAGES]
_BROWSE_CUM = _cumulative([w for _, w in BROWSE_PAGES])
_SOURCE_NAMES = [s for s, _, _ in SOURCES]
_SOURCE_CUM = _cumulative([w for _, w, _ in SOURCES])
_LANDING = {s: (list(land), _cumulative(list(land.values()))) for s, _, land in SOURCES}


def users_for(events: int) -> int:
    """How many users browse: about eight page views (two sessions) per user on average."""
    return max(10, events // 8)


def _user_table(users: int) -> tuple[list[str], list[str], list[float]]:
    """User ids, each user's device, and cumulative activity weights: most users visit once or
    twice, a few come back many times (a capped Pareto tail). Depends only on ``users``, so the
    initial load and the appended events share one population."""
    rng = random.Random(users)
    ids = [f"u{i:06d}" for i in range(1, users + 1)]
    devices = rng.choices([d for d, _ in DEVICES], weights=[w for _, w in DEVICES], k=users)
    activity = _cumulative([min(10.0, rng.paretovariate(2.0)) for _ in range(users)])
    return ids, devices, activity


def _next_page(rng: random.Random, page: str) -> str:
    r = rng.random()
    if page == "/cart" and r < 0.35:
        return "/checkout"
    if page == "/checkout" and r < 0.6:
        return CHECKOUT_DONE
    if page == "/blog/spring-sale" and r < 0.6:
        return rng.choice(SALE_PAGES)
    if page.startswith("/products/") and r < 0.15:
        return "/cart"
    return rng.choices(_BROWSE, cum_weights=_BROWSE_CUM)[0]


def _time_on_page_ms(rng: random.Random, page: str) -> int:
    """Log-normal time on page around a per-page mean (people read posts, skim the home page)."""
    mean = TIME_ON_PAGE_S.get(page) or TIME_ON_PAGE_S.get(page[: page.find("/", 1) + 1], 35)
    sigma = 0.8
    # mu chosen so that the distribution's mean is ``mean`` seconds.
    ms = rng.lognormvariate(math.log(mean * 1000) - sigma * sigma / 2, sigma)
    return min(10 * MINUTE_MS, max(500, int(ms)))


def generate_pageviews(
    count: int,
    *,
    start_ms: int = START_MS,
    period_ms: int = BATCH_PERIOD_MS,
    users: int,
    seed: int = SEED,
    ramp: bool = True,
    warmup_ms: int = 0,
    newsletter_at_ms: int | None = None,
) -> list[PageView]:
    """Exactly ``count`` page views in [start_ms, start_ms + period_ms), sorted by time.

    Sessions start at random times (more of them later in the morning when ``ramp``; from
    ``warmup_ms`` before ``start_ms`` on, so that sessions already under way at ``start_ms``
    contribute their later views), from a weighted source that decides the landing page. Each view
    lasts a log-normal time on page, and after each view the visitor leaves with some probability.
    Now and then a visitor pauses for 5-20 minutes (same session) or leaves a tab open and comes
    back after more than 30 minutes (a new session, by the usual definition). The same arguments
    always give the same events.
    """
    rng = random.Random(seed)
    ids, devices, activity = _user_table(users)
    end_ms = start_ms + period_ms
    out: list[PageView] = []
    while len(out) < count:
        if newsletter_at_ms is not None and rng.random() < NEWSLETTER_SHARE:
            ts = newsletter_at_ms + int(rng.expovariate(1 / NEWSLETTER_DECAY_MS))
            referrer = "newsletter"
        else:
            # sqrt(u) has a linearly rising density: traffic grows through the morning.
            frac = math.sqrt(rng.random()) if ramp and rng.random() < 0.7 else rng.random()
            ts = start_ms - warmup_ms + int(frac * (period_ms + warmup_ms))
            referrer = rng.choices(_SOURCE_NAMES, cum_weights=_SOURCE_CUM)[0]
        landing_pages, landing_cum = _LANDING[referrer]
        page = rng.choices(landing_pages, cum_weights=landing_cum)[0]
        u = rng.choices(range(users), cum_weights=activity)[0]
        while ts < end_ms and len(out) < count:
            duration = _time_on_page_ms(rng, page)
            if ts >= start_ms:
                out.append(PageView(ts, ids[u], page, referrer, devices[u], duration))
            if rng.random() < (0.7 if page == CHECKOUT_DONE else 0.25):
                break
            ts += duration + int(rng.expovariate(1 / 4000))
            r = rng.random()
            if r < 0.02:
                ts += rng.randint(31 * MINUTE_MS, 2 * HOUR_MS)
            elif r < 0.05:
                ts += rng.randint(5 * MINUTE_MS, 20 * MINUTE_MS)
            referrer, page = page, _next_page(rng, page)
    out.sort(key=lambda v: v.timestamp)
    # Two overlapping sessions of one user may land on the same millisecond; nudge the later one so
    # "first/last page of a session" never depends on how a tie is broken.
    seen: set[tuple[str, int]] = set()
    nudged = False
    for i, view in enumerate(out):
        ts = view.timestamp
        while (view.user_id, ts) in seen:
            ts += 1
        if ts != view.timestamp:
            out[i] = replace(view, timestamp=ts)
            nudged = True
        seen.add((view.user_id, ts))
    if nudged:
        out.sort(key=lambda v: v.timestamp)
    return out
