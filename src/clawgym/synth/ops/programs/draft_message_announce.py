"""draft_message's program of an announcement: the active people of the team list as recipients, the event as
written in the request, and the planning notes themselves as the body (when, where, agenda, RSVP)."""
# ruff: noqa: E401, I001, UP031 (written compactly, as a small model would copy it)

import csv, os
NOTES, TEAM, OUT = '{notes}', '{team}', '{out}'
FROM, EVENT = '{sender}', '{event}'
EMAIL, STATUS, ACTIVE = '{email_col}', '{status_col}', '{active}'
to = [r[EMAIL] for r in csv.DictReader(open(TEAM)) if r[STATUS] == ACTIVE]
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
text = 'From: %s\nTo: %s\nSubject: Invitation: %s\n\n' % (FROM, ', '.join(to), EVENT) + open(NOTES).read()
open(OUT, 'w').write(text)
print('wrote', OUT, 'to', len(to), 'people')
