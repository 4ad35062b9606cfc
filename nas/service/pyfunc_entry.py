"""A registered recnas model's MLflow "model from code": ``nas.service.serving`` logs this file as
the model's code, and loading the model runs it, so no pickled code is stored or unpickled.
The weights and vocabularies are the model's artifacts (see ``nas/service/serving.py``)."""

import mlflow

from nas.service.serving import pyfunc_model

mlflow.models.set_model(pyfunc_model())
