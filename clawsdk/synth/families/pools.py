"""Word pools the families draw names, places and things from."""

FIRST = ("Ada", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Liam",
         "Maya", "Noor", "Omar", "Priya", "Quinn", "Rosa", "Sam", "Tariq", "Uma", "Victor", "Wen", "Ximena",
         "Yusuf", "Zoe", "Aiko", "Bruno", "Carmen", "Dmitri", "Esther", "Felix", "Gita", "Hugo", "Ilse",
         "Jamal", "Kira", "Lars", "Mei", "Nils", "Olga", "Pablo", "Rania", "Sven", "Tomas", "Vera")
LAST = ("Ng", "Okafor", "Schmidt", "Patel", "Rossi", "Kim", "Nakamura", "Silva", "Dubois", "Kowalski",
        "Haddad", "Larsen", "Moreau", "Costa", "Ivanova", "Brennan", "Yilmaz", "Santos", "Fischer", "Chen",
        "Lopez", "Novak", "Abebe", "Lindqvist", "Mensah", "Horvat", "Quispe", "Tanaka", "Weber", "Adeyemi")
DOMAINS = ("northwind.test", "acme.test", "globex.test", "initech.test", "umbrella.test", "hooli.test",
           "vandelay.test", "stark.test", "wayne.test", "tyrell.test", "oscorp.test", "wonka.test")
COMPANIES = ("Northwind", "Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay", "Soylent",
             "Tyrell", "Oscorp", "Wonka", "Cyberdyne", "Gringotts", "Monarch", "Pied Piper", "Dunder")
REGIONS = ("North", "South", "East", "West", "Central", "Coastal", "Highlands", "Metro")
PRODUCTS = ("widget", "gadget", "sprocket", "gizmo", "doohickey", "flange", "grommet", "valve", "bracket",
            "hinge", "socket", "spindle", "washer", "bearing", "coupler", "lever")
VERBS = ("draft", "review", "send", "update", "book", "prepare", "confirm", "schedule", "collect",
         "summarize", "check", "fix", "order", "publish", "archive", "share")
OBJECTS = ("the budget sheet", "the launch plan", "the vendor contract", "the onboarding guide",
           "the Q3 report", "the travel booking", "the press release", "the test plan", "the invoice batch",
           "the roadmap slides", "the survey results", "the hiring brief", "the release notes",
           "the offsite agenda", "the support macros", "the data export")
TOPICS = ("storage", "billing", "search", "auth", "scheduler", "payments", "reports", "uploads", "sync",
          "notifications", "export", "importer", "cache", "api", "ui", "cli")
WORDS = ("harbor", "meadow", "copper", "lantern", "orbit", "cedar", "quartz", "willow", "falcon", "ember",
         "delta", "summit", "canyon", "prairie", "glacier", "tundra", "atlas", "beacon", "cobalt", "drift")


def person(rng) -> tuple[str, str]:
    return rng.choice(FIRST), rng.choice(LAST)


def people(rng, n: int) -> list[tuple[str, str]]:
    """n distinct (first, last) pairs."""
    seen: set[tuple[str, str]] = set()
    out: list[tuple[str, str]] = []
    while len(out) < n:
        p = person(rng)
        if p not in seen and p[0] not in {q[0] for q in out}:
            seen.add(p)
            out.append(p)
    return out
