"""convert_format's program from a .env file to JSON or YAML: quotes dropped, numbers and booleans typed."""
# ruff: noqa: E401, I001 (written compactly, as a small model would copy it)

import os, json, re, yaml
SRC, OUT = '{src}', '{out}'
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
def typed(v):
    t = v.strip()
    if re.fullmatch(r'-?(0|[1-9]\d*)(\.\d+)?', t):
        return float(t) if '.' in t else int(t)
    if t.lower() in ('true', 'false'):
        return t.lower() == 'true'
    return v
data = {}
for line in open(SRC):
    k, eq, v = line.strip().partition('=')
    if eq and not k.startswith('#'):
        v = v.strip()
        data[k.strip()] = typed(v[1:-1] if v[:1] == '"' else v)
with open(OUT, 'w') as f:
    if OUT.endswith('.json'):
        json.dump(data, f, indent=2)
    else:
        yaml.safe_dump(data, f, sort_keys=False)
print('wrote', len(data), 'settings to', OUT)
