"""convert_format's program from an INI config to JSON or YAML: sections as objects, numbers and booleans typed."""
# ruff: noqa: E401, I001 (written compactly, as a small model would copy it)

import os, configparser, json, re, yaml
SRC, OUT = '{src}', '{out}'
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
def typed(v):
    t = v.strip()
    if re.fullmatch(r'-?(0|[1-9]\d*)(\.\d+)?', t):
        return float(t) if '.' in t else int(t)
    if t.lower() in ('true', 'false'):
        return t.lower() == 'true'
    return v
c = configparser.ConfigParser(interpolation=None)
c.optionxform = str
c.read(SRC)
data = {s: {k: typed(v) for k, v in c[s].items()} for s in c.sections()}
with open(OUT, 'w') as f:
    if OUT.endswith('.json'):
        json.dump(data, f, indent=2)
    else:
        yaml.safe_dump(data, f, sort_keys=False)
print('wrote', len(data), 'settings to', OUT)
