"""The exercise catalogue: one module per notebook; importing this package registers them all."""

from course_utils.exercises import nb00, nb01, nb02, nb03, nb04, nb05, nb06, nb07  # noqa: F401
