"""What the Telescope paper (Nair et al., ATC '24) reports, for `tierscope repro telescope`.

Values are the paper's own words where it gives no number ("~0", "<0.1", ">0.9"): its
figures are plots, and only the text, Table 2 and section 6.2 give numbers.
"""

from __future__ import annotations

#: Experiment file stem in experiments/paper/ -> what the paper calls it.
EXPERIMENTS: dict[str, str] = {
    "multiphase-5t": "Multi-phase, 5 TB, 4 KB pages (6.2.1, Fig. 7-8)",
    "multiphase-5t-thp": "Multi-phase, 5 TB, 2 MB pages (6.2.1)",
    "needle-5t": "Needle: 50 MB hot in 5 TB (6.2.3)",
    "needle-5t-thp": "Needle, 2 MB pages",
    "subtb-1g": "SubTB 1 GB, 10% hot (6.2.2, Fig. 9)",
    "subtb-10g": "SubTB 10 GB, 10% hot",
    "subtb-100g": "SubTB 100 GB, 10% hot",
    "subtb-1g-thp": "SubTB 1 GB, 2 MB pages",
    "subtb-10g-thp": "SubTB 10 GB, 2 MB pages",
    "subtb-100g-thp": "SubTB 100 GB, 2 MB pages",
}

_TELESCOPE_HIGH = (">0.9", ">0.9")

#: (experiment, monitor) -> (precision, recall) as the paper states them.
PRECISION_RECALL: dict[tuple[str, str], tuple[str, str]] = {
    ("multiphase-5t", "damon-mod"): ("~0", "~0"),
    ("multiphase-5t", "damon-agg"): ("~0", "~0"),
    ("multiphase-5t", "pebs-mod"): ("~1", "<0.1"),
    ("multiphase-5t", "pebs-agg"): ("~1", "<0.1"),
    ("multiphase-5t", "telescope-bnd"): _TELESCOPE_HIGH,
    ("multiphase-5t", "telescope-flx"): _TELESCOPE_HIGH,
    ("multiphase-5t-thp", "damon-mod"): ("0.94", "0.92"),
    ("multiphase-5t-thp", "damon-agg"): ("0.96", "0.90"),
    ("multiphase-5t-thp", "telescope-bnd"): ("0.96", "0.97"),
    ("multiphase-5t-thp", "telescope-flx"): ("0.96", "0.97"),
    ("needle-5t", "damon-mod"): ("0", "0"),
    ("needle-5t", "damon-agg"): ("0", "0"),
    ("needle-5t", "pebs-mod"): ("0.81", "0.99"),
    ("needle-5t", "pebs-agg"): ("0.81", "0.99"),
    ("needle-5t", "telescope-bnd"): ("0.88", "0.88"),
    ("needle-5t", "telescope-flx"): ("0.92", "0.92"),
    ("subtb-1g", "damon-mod"): (">=0.9", ">=0.9"),
    ("subtb-1g", "damon-agg"): (">=0.9", ">=0.9"),
    ("subtb-1g", "pebs-mod"): (">=0.9", ">=0.9"),
    ("subtb-1g", "pebs-agg"): (">=0.9", ">=0.9"),
    ("subtb-1g", "telescope-bnd"): _TELESCOPE_HIGH,
    ("subtb-1g", "telescope-flx"): _TELESCOPE_HIGH,
    ("subtb-10g", "damon-mod"): ("", "drops significantly"),
    ("subtb-10g", "damon-agg"): ("", "drops significantly"),
    ("subtb-10g", "pebs-mod"): ("high", "drops"),
    ("subtb-10g", "pebs-agg"): ("high", "drops"),
    ("subtb-10g", "telescope-bnd"): _TELESCOPE_HIGH,
    ("subtb-10g", "telescope-flx"): _TELESCOPE_HIGH,
    ("subtb-100g", "damon-mod"): ("0", "0"),
    ("subtb-100g", "damon-agg"): ("0", "0"),
    ("subtb-100g", "pebs-mod"): ("high", "drops significantly"),
    ("subtb-100g", "pebs-agg"): ("high", "drops significantly"),
    ("subtb-100g", "telescope-bnd"): _TELESCOPE_HIGH,
    ("subtb-100g", "telescope-flx"): _TELESCOPE_HIGH,
}

#: Table 2: cycles (billions) of the profiling kernel thread.
TABLE2_GCYCLES: dict[tuple[str, str], float] = {
    ("multiphase-5t", "damon-mod"): 9.55,
    ("multiphase-5t", "damon-agg"): 24.27,
    ("multiphase-5t", "telescope-bnd"): 2.25,
    ("multiphase-5t", "telescope-flx"): 2.28,
    ("multiphase-5t-thp", "damon-mod"): 2.42,
    ("multiphase-5t-thp", "damon-agg"): 11.94,
    ("multiphase-5t-thp", "telescope-bnd"): 2.09,
    ("multiphase-5t-thp", "telescope-flx"): 1.80,
    ("subtb-1g", "damon-mod"): 1.15,
    ("subtb-1g", "damon-agg"): 5.80,
    ("subtb-1g", "telescope-bnd"): 0.83,
    ("subtb-1g", "telescope-flx"): 0.95,
    ("subtb-10g", "damon-mod"): 19.53,
    ("subtb-10g", "damon-agg"): 68.22,
    ("subtb-10g", "telescope-bnd"): 3.20,
    ("subtb-10g", "telescope-flx"): 1.16,
    ("subtb-100g", "damon-mod"): 3.52,
    ("subtb-100g", "damon-agg"): 18.91,
    ("subtb-100g", "telescope-bnd"): 1.27,
    ("subtb-100g", "telescope-flx"): 1.19,
}
