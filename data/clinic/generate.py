"""Writes the clinic example: people, their visits, and a public table of
departments. Synthetic: every value is drawn here, from a fixed seed, so
running it again writes the same files.

    python3 data/clinic/generate.py
"""

import csv
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEOPLE = 3000
REGIONS = ["north", "south", "east", "west"]
# (department, kind, typical cost)
DEPARTMENTS = [
    ("cardiology", "specialist", 420),
    ("dermatology", "specialist", 180),
    ("emergency", "urgent", 650),
    ("general", "primary", 90),
    ("paediatrics", "primary", 110),
    ("radiology", "diagnostic", 300),
]


def visits_of(rng, age):
    """How many visits one person made in the year: most a few, some
    none, and a few frequent visitors with dozens."""
    if rng.random() < 0.03:
        return rng.randint(25, 60)
    return min(rng.randint(0, 4) + (age >= 60) * rng.randint(0, 4), 12)


def department_of(rng, age):
    names = [d[0] for d in DEPARTMENTS]
    weights = [3 if age >= 60 else 1, 1, 1, 6, 4 if age < 18 else 0.2, 2]
    return rng.choices(names, weights)[0]


def main():
    rng = random.Random(20261127)
    typical = {name: cost for name, _, cost in DEPARTMENTS}
    people, visits = [], []
    for person in range(1, PEOPLE + 1):
        age = rng.randint(0, 95)
        people.append((person, age, rng.choice(["F", "M"]), rng.choice(REGIONS)))
        for _ in range(visits_of(rng, age)):
            department = department_of(rng, age)
            cost = max(10, round(rng.gauss(typical[department], typical[department] / 3)))
            visits.append((person, rng.randint(1, 12), department, cost))
    write("people.csv", ["id", "age", "sex", "region"], people)
    write("visits.csv", ["person", "month", "department", "cost"], visits)
    write("departments.csv", ["department", "kind"], [d[:2] for d in DEPARTMENTS])


def write(name, header, rows):
    with open(HERE / name, "w", newline="") as file:
        writer = csv.writer(file, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


if __name__ == "__main__":
    main()
