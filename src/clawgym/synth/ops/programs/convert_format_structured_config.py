"""convert_format's program from a JSON or YAML config to the other format."""
# ruff: noqa: E401, I001 (written compactly, as a small model would copy it)

import os, json, yaml
SRC, OUT = '{src}', '{out}'
os.makedirs(os.path.dirname(OUT) or '.', exist_ok=True)
data = json.load(open(SRC)) if SRC.endswith('.json') else yaml.safe_load(open(SRC))
with open(OUT, 'w') as f:
    if OUT.endswith('.json'):
        json.dump(data, f, indent=2)
    else:
        yaml.safe_dump(data, f, sort_keys=False)
print('wrote', len(data), 'settings to', OUT)
