"""The backend protocol and the backend-neutral value objects: `tsmodel.ground.base`.

They live in the ground package, below the planners; this path keeps working
(``from tsmodel.backends.base import ReadRequest, RowSet``) and names the
same objects.
"""

from tsmodel.ground.base import *  # noqa: F403
from tsmodel.ground.base import __all__ as __all__
