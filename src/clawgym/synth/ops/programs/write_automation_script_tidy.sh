#!/bin/sh
# usage: sh tidy_names.sh DIR MANIFEST
# Renames every file directly in DIR to a tidy name (lower case, runs of other characters -> "_") and lists the
# renames in MANIFEST (CSV: old,new).
set -eu
dir="$1"
manifest="$2"
mkdir -p "$(dirname "$manifest")"
echo "old,new" > "$manifest"
for path in "$dir"/*; do
    [ -f "$path" ] || continue
    old=${path##*/}
    new=$(printf '%s' "$old" | sed -e 'y/ABCDEFGHIJKLMNOPQRSTUVWXYZ/abcdefghijklmnopqrstuvwxyz/' \
        -e 's/[^a-z0-9.]\{1,\}/_/g' -e 's/_*\._*/./g' -e 's/^_//' -e 's/_$//')
    if [ "$old" != "$new" ]; then
        mv -n "$path" "$dir/$new"
        printf '"%s","%s"\n' "$old" "$new" >> "$manifest"
    fi
done
