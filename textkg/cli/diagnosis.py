"""Diagnosing a patient cohort's held-out patients with a finished run.

* ``textkg diagnose RUN [--patients test|valid] [--units FILE] [--device D]``
"""

from __future__ import annotations

from textkg.cli.flags import add_device_flag


def add_diagnose(sub) -> None:
    """``textkg diagnose``."""
    from textkg.pipeline.diagnosis import SPLITS

    dg = sub.add_parser(
        "diagnose",
        help="rank every disease for each held-out patient of a cohort run (textkg data simulate-patients): "
        "MRR / top 1 / top 10 of the true diagnosis for the run's model (each patient folded in from its "
        "phenotypes), phenotype similarity (Resnik, public annotations), popularity and disease-name TF-IDF, "
        "overall and for diseases with public or withheld annotations (docs/diagnosis.md)",
    )
    dg.add_argument("run_dir", help="a finished run directory (textkg train --out) on a patient cohort")
    dg.add_argument(
        "--patients", choices=SPLITS, default="test", help="whose patients: test (new) or valid (default: test)"
    )
    dg.add_argument(
        "--units",
        metavar="FILE",
        help="the patients, one id per line (default: the run's --unit-entities, else patients.txt in its dataset)",
    )
    add_device_flag(dg, "where the model runs (not the run's train.device)")


def diagnose(args) -> dict:
    from textkg.pipeline.diagnosis import diagnose_run

    return diagnose_run(args.run_dir, split=args.patients, units=args.units, device=args.device or "auto")


PARSERS = {"diagnose": add_diagnose}
HANDLERS: dict = {("diagnose", None): diagnose}
