"""draft_message's program of a reply with figures: addresses, subject, column names, category, month and the
supplier to leave out copied from the request and the question; the figures computed from the order sheet."""
# ruff: noqa: E401, I001, UP031 (written compactly, as a small model would copy it)

import csv, os, datetime as dt
DATA, OUT = '{data}', '{out}'
FROM, TO, CC = '{sender}', '{to}', '{cc}'
SUBJECT = '{subject}'
DATE, SUPPLIER, CAT, AMOUNT = '{date_col}', '{supplier_col}', '{cat_col}', '{amount_col}'
CATEGORY, MONTH, EXCLUDE = '{category}', '{month}', '{exclude}'
m = dt.datetime.strptime(MONTH, '%B %Y').strftime('%Y-%m')
rows = [r for r in csv.DictReader(open(DATA)) if r[CAT] == CATEGORY and r[DATE].startswith(m)
        and r[SUPPLIER] != EXCLUDE]
by = {}
for r in rows:
    by[r[SUPPLIER]] = by.get(r[SUPPLIER], 0) + float(r[AMOUNT])
top = min(by, key=lambda k: (-by[k], k))
total = sum(float(r[AMOUNT]) for r in rows)
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
text = 'From: %s\nTo: %s\n' % (FROM, TO) + ('Cc: %s\n' % CC if CC else '') + 'Subject: %s\n\n' % SUBJECT
text += 'Hello,\n\nIn %s we spent %.2f on %s, across %d orders. The biggest supplier was %s (%.2f).\n' % (
    MONTH, total, CATEGORY, len(rows), top, by[top])
open(OUT, 'w').write(text)
print('wrote', OUT)
