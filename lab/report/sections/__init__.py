"""The sections of the HTML report, one module each; ``lab.report.html`` puts them on the page."""
