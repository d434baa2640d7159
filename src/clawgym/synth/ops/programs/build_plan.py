"""build_plan's program of a project plan: the dates are the request's own words (any of the ways
_docs_common.dated writes them), the task list order is copied from the request and is the dependency order."""
# ruff: noqa: E401, I001, UP031 (written compactly, as a small model would copy it)

import csv, json, os, datetime as dt
SRC, OUT = '{src}', '{out}'
START, HOLIDAYS = '{start}', '{holidays}'
ORDER = '{order}'.split(', ')
TASK, DUR, DEPS, OWNER = '{incols}'
HEADER, FINISH = '{outcols}', '{finish}'
def day(s):
    for f in ('%Y-%m-%d', '%A %d %B %Y', '%d %B %Y', '%B %d, %Y', '%a %d/%m/%Y'):
        try:
            return dt.datetime.strptime(s, f).date()
        except ValueError:
            pass
off = [day(h) for h in HOLIDAYS]
def work(d, n):
    while d.weekday() > 4 or d in off or n > 0:
        n -= d.weekday() < 5 and d not in off and n > 0
        d += dt.timedelta(1)
    return d
tasks = {t[TASK]: t for t in (json.load(open(SRC)) if SRC.endswith('.json') else csv.DictReader(open(SRC)))}
end, rows = {}, []
for n in ORDER:
    t = tasks[n]
    deps = t[DEPS] if SRC.endswith('.json') else [x for x in t[DEPS].split('; ') if x]
    s = max([work(day(START), 0)] + [work(end[d], 1) for d in deps])
    end[n] = work(s, int(t[DUR]) - 1)
    rows.append([n, t[OWNER], str(s), str(end[n])])
rows.sort(key=lambda r: r[2])
if OUT.endswith('.csv'):
    text = ''.join(','.join(r) + '\n' for r in [HEADER] + rows)
else:
    text = '# Project plan\n\nStart: %s\n\n| ' % day(START) + ' | '.join(HEADER) + ' |\n|---|---|---|---|\n'
    text += ''.join('| ' + ' | '.join(r) + ' |\n' for r in rows) + '\n%s: %s\n' % (FINISH, max(end.values()))
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
open(OUT, 'w').write(text)
print('wrote', len(rows), 'tasks to', OUT)
