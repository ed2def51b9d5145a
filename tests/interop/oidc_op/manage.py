#!/usr/bin/env python3
"""manage.py of the loopback OpenID provider (see ../oidc_op.py). Needs OIDC_OP_DATA."""

import os
import sys

if __name__ == "__main__":
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "op_site.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
