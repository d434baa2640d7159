"""edit_config's program for an INI config: EDITS (one line per bullet of the request: ('set', 'sec.key',
value), ('rename', 'sec.key', 'sec.new_key'), ('drop', 'sec.key', ...), ('add', section, {key: value}), keys and
values copied as the request writes them) applied line by line, so the comments and the key order stay."""
# ruff: noqa: UP031 (the %-formatting is the program as a small model would copy it)

PATH = '{path}'
EDITS = '{edits}'
L = open(PATH).read().splitlines()
def find(key):
    s, k = key.split('.')
    i = L.index('[' + s + ']') + 1
    while L[i].split('=')[0].strip() != k:
        assert not L[i].startswith('['), key
        i += 1
    return i
for e in EDITS:
    if e[0] == 'set':
        i = find(e[1])
        L[i] = L[i].split('=')[0] + '= ' + e[2]
    elif e[0] == 'rename':
        i = find(e[1])
        L[i] = L[i].replace(e[1].split('.')[1], e[2].split('.')[1], 1)
    elif e[0] == 'drop':
        for key in e[1:]:
            i = find(key)
            del L[i]
            if L[i - 1].lstrip().startswith('#'):
                del L[i - 1]
    elif e[0] == 'add':
        L += ['', '[' + e[1] + ']'] + ['%s = %s' % kv for kv in e[2].items()]
open(PATH, 'w').write('\n'.join(L) + '\n')
print('applied', len(EDITS), 'changes to', PATH)
