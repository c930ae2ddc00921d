#!/usr/bin/env python3
"""Writes the builtin holiday calendars of slotguard-cron (cron/data/holidays/<CC>.txt).

The dates come from the python `holidays` package (MIT licence), default categories, observed days
included, for the years below. Run it from a virtual environment:

    python3 -m venv /tmp/hv && /tmp/hv/bin/pip install holidays
    /tmp/hv/bin/python cron/data/generate_holidays.py

and commit the output. Each file starts with a header naming the package version and the years; the
lines that follow are `YYYY-MM-DD name`, one per holiday, in date order (several names of one date
are joined with "; ").
"""

import os
import sys

import holidays

COUNTRIES = ["KR", "US", "GB", "DE", "FR", "JP", "CN", "SG", "AU", "CA"]
FIRST, LAST = 2000, 2050


def main() -> None:
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "holidays")
    os.makedirs(out, exist_ok=True)
    for code in COUNTRIES:
        days = holidays.country_holidays(code, years=range(FIRST, LAST + 1))
        lines = [
            f"# holidays {holidays.__version__} {code} {FIRST}-{LAST} default categories, observed days included",
        ]
        for date in sorted(days.keys()):
            name = days.get(date).replace("\n", " ")
            lines.append(f"{date.isoformat()} {name}")
        with open(os.path.join(out, f"{code}.txt"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        print(f"{code}: {len(lines) - 1} dates", file=sys.stderr)


if __name__ == "__main__":
    main()
