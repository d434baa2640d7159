"""edit_config's program for a JSON config (no comments to keep): loaded, EDITS (one line per bullet of the
request: ('set', 'sec.key', value), ('rename', 'sec.key', 'sec.new_key'), ('drop', 'sec.key', ...), ('add',
section, {key: value}), values as JSON literals) applied, and dumped with the original two-space indentation."""
# ruff: noqa: E402, I001 (the import comes after the request's constants, as the program runs)

PATH = '{path}'
EDITS = '{edits}'
import json
def val(x):
    try:
        return json.loads(x)
    except ValueError:
        return x
C = json.load(open(PATH))
for e in EDITS:
    s, _, k = e[1].partition('.')
    if e[0] == 'set':
        C[s][k] = val(e[2])
    elif e[0] == 'rename':
        n = e[2].split('.')[1]
        C[s] = {n if a == k else a: b for a, b in C[s].items()}
    elif e[0] == 'drop':
        for key in e[1:]:
            s, k = key.split('.')
            del C[s][k]
    elif e[0] == 'add':
        C[e[1]] = {a: val(b) for a, b in e[2].items()}
open(PATH, 'w').write(json.dumps(C, indent=2) + '\n')
print('applied', len(EDITS), 'changes to', PATH)
