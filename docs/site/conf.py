# SPDX-License-Identifier: MIT OR Apache-2.0
# Sphinx configuration of the tickwheel documentation site (docs/site).
# Built by the CMake target `docs` (docs/CMakeLists.txt), which runs Doxygen
# for the XML first and passes its directory in TW_DOXYGEN_XML, and the
# version in TW_VERSION; warnings are errors (sphinx-build -W --keep-going).
import os
import re

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))


def _version():
    v = os.environ.get("TW_VERSION")
    if v:
        return v
    with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(tickwheel\s+VERSION\s+([0-9.]+)", f.read())
    return m.group(1) if m else "unknown"


project = "tickwheel"
author = "the tickwheel authors"
copyright = "the tickwheel authors; MIT OR Apache-2.0"
release = version = _version()

extensions = ["myst_parser", "breathe"]
source_suffix = {".md": "markdown"}
master_doc = "index"
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

breathe_projects = {"tickwheel": os.environ.get("TW_DOXYGEN_XML", os.path.join(here, "_doxygen", "xml"))}
breathe_default_project = "tickwheel"
breathe_domain_by_extension = {"h": "c", "hpp": "cpp"}
breathe_show_include = True

html_theme = "furo"
html_title = f"tickwheel {release}"
html_static_path = ["_static"]
html_css_files = ["tickwheel.css"]
html_show_sourcelink = False
html_theme_options = {
    "navigation_with_keys": True,
}
pygments_style = "friendly"
pygments_dark_style = "monokai"
