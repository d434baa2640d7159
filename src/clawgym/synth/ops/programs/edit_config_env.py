"""edit_config's program for a .env file: EDITS (one line per bullet of the request: ('set', KEY, value),
('rename', KEY, NEW_KEY), ('drop', KEY, ...), ('add', 'KEY=value', ...), copied as the request writes them)
applied line by line, so the comments and the variable order stay; values with spaces and the like are quoted."""

PATH = '{path}'
EDITS = '{edits}'
L = open(PATH).read().splitlines()
def find(key):
    return [x.split('=')[0].strip() for x in L].index(key)
def q(v):
    return '"' + v + '"' if any(c in v for c in ' #*') else v
for e in EDITS:
    if e[0] == 'set':
        i = find(e[1])
        L[i] = e[1] + '=' + q(e[2])
    elif e[0] == 'rename':
        i = find(e[1])
        L[i] = L[i].replace(e[1], e[2], 1)
    elif e[0] == 'drop':
        for key in e[1:]:
            i = find(key)
            del L[i]
            if L[i - 1].lstrip().startswith('#'):
                del L[i - 1]
    elif e[0] == 'add':
        L += [''] + [x.split('=')[0] + '=' + q(x.split('=', 1)[1]) for x in e[1:]]
open(PATH, 'w').write('\n'.join(L) + '\n')
print('applied', len(EDITS), 'changes to', PATH)
