"""Writes held-out Python source for the byte-level model: the source of a
few standard-library modules, in a fixed order (deterministic for a given
Python version; the gates compare configurations on the same text)."""

import difflib
import heapq
import inspect
import json.decoder
import json.encoder
import sys
import textwrap

modules = [json.decoder, json.encoder, difflib, heapq, textwrap]
sys.stdout.write("".join(inspect.getsource(m) for m in modules))
