"""Analyst wellbeing: blur in reading views, opt-outs by target group, breaks, exposure."""
