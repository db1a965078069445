"""The course's machinery: what runs the course around the hooks it teaches (the library is ``course_utils``).

- ``notebook``        -- ``setup_notebook()`` (seeds, threads, print options, PNG figures), ``print_warnings()``
- ``checks``          -- ``check(exercise_id, answer)`` runs an exercise's check; ``hint(exercise_id)``
- ``guard``           -- the time limit, output limit and session guard that ``check()`` runs an answer in
- ``exercise_kit`` / ``exercises`` -- what an exercise is, a verdict and its status; the catalogue, one module per
  notebook
- ``progress_record`` -- each ``check()`` appends a line to the learner's record; ``progress`` -- ``progress()``
  sums it up as a table
- ``report_problem``  -- the prefilled "report a problem" issue link
- ``learner_edition``, ``workspace`` -- the edition with solutions stubbed, and the learner's own copy of it
- ``course``          -- the course map, read from the notebooks' opening cells
- ``env_check``, ``pins`` -- ``doctor()`` checks the environment against the supported versions and says what to do
- ``cloud``           -- where the course is published; the Colab/Kaggle links and install lines
- ``messages``        -- ``_()``: the machinery's messages in the learner's language (gettext catalogue in ``locale/``)
- ``layout``          -- the notebooks' file pattern and the workspace's file names, written once (imports nothing)

Nothing is imported here: import the module you need (``from course_utils.machinery.checks import check``), or the
names the notebooks use from ``course_utils``.
"""
