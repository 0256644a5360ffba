"""What a column family's GC rule deletes: `tsmodel.ground.gc`.

It lives in the ground package, below the planners; this path keeps working
and names the same functions.
"""

from tsmodel.ground.gc import *  # noqa: F403
from tsmodel.ground.gc import __all__ as __all__
