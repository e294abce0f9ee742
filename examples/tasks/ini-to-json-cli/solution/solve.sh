#!/usr/bin/env bash
# Reference solution: write the converter with configparser, then convert the app config.
set -euo pipefail
cat > ini2json.py <<'PY'
#!/usr/bin/env python3
"""Convert an INI file to JSON.

Usage: ini2json.py INPUT.ini [-o OUTPUT.json]
"""
import argparse
import configparser
import json
import re
import sys

BOOLEANS = {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}


def convert_value(raw):
    value = raw.strip()
    if value.lower() in BOOLEANS:
        return BOOLEANS[value.lower()]
    if re.fullmatch(r"[+-]?\d+", value):
        return int(value)
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+)", value):
        return float(value)
    if value == "":
        return None
    return value


def ini_to_dict(path):
    parser = configparser.ConfigParser(interpolation=None, comment_prefixes=("#", ";"),
                                       inline_comment_prefixes=None, allow_no_value=False)
    parser.optionxform = str  # keep key case
    with open(path, encoding="utf-8") as f:
        parser.read_file(f)
    return {name: {key: convert_value(val) for key, val in parser[name].items()}
            for name in parser.sections()}


def main(argv=None):
    ap = argparse.ArgumentParser(description="Convert an INI file to JSON.")
    ap.add_argument("input")
    ap.add_argument("-o", "--output")
    args = ap.parse_args(argv)
    try:
        data = ini_to_dict(args.input)
    except (OSError, configparser.Error) as e:
        print("ini2json: %s" % e, file=sys.stderr)
        return 1
    text = json.dumps(data, indent=2) + "\n"
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
PY
python3 ini2json.py config/app.ini -o config/app.json
