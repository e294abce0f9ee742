"""subscribers.csv must still be the original file."""
import hashlib
import sys

try:
    data = open("subscribers.csv", "rb").read().replace(b"\r\n", b"\n")
except OSError:
    print("subscribers.csv is missing")
    sys.exit(1)
if hashlib.sha256(data).hexdigest() != "277a115bd9e025a3435a996f0fcb14ae1284a730e919546f1c85d934166183d7":
    print("subscribers.csv was modified")
    sys.exit(1)
print("subscribers.csv unchanged")
