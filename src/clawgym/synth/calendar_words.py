"""Month and weekday names in English, for the generators' wording (never the locale's: a task's text must not
depend on the machine that synthesized it). Tuples, in calendar order: `rng.choice` over them draws the same
as over the lists they replace."""

from __future__ import annotations

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
WORKDAYS = WEEKDAYS[:5]
