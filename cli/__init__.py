"""The ``xdn`` command line: the composition root at the edge.

:mod:`cli.main` builds the parser from each package's subcommands (registered explicitly, so the
import graph shows them); :mod:`cli.admin` holds the administrators' and auditors' commands that
belong to no single daemon, :mod:`cli.codec` the standalone encrypt/decrypt tools.
"""
