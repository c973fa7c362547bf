"""Every page form as a Flask-WTF class whose validators hold its rules (domain.rules' through `Follows`), and
`csrf_field()` for the templates.

A form whose only input is its button (log out, remove, revoke, accept) has no class: the login guard's CSRF
check is all it needs. Every form carries the hidden CSRF input through `csrf_field()`.
"""

from __future__ import annotations

from typing import Any

from flask import Flask
from flask_wtf.csrf import generate_csrf
from markupsafe import Markup
from wtforms import EmailField, HiddenField, PasswordField, StringField
from wtforms.validators import DataRequired, EqualTo, Length, Optional, StopValidation

from domain.accounts import MIN_PASSWORD_LENGTH
from domain.datasets import DATASET_DESCRIPTION, DATASET_NAME, TASK_COUNT
from domain.rules import NAME, NAME_CHARS, one_of
from domain.scoring import ATTEMPT_COUNT
from domain.triage import (
    HUMAN_CATEGORY,
    LABEL_COLOR,
    LABEL_DESCRIPTION,
    LABEL_DESCRIPTION_CHARS,
    LABEL_NAME,
    LABEL_NAME_CHARS,
    NOTE_BODY,
    REASON,
    REASON_CHARS,
    REVIEW_STATE,
    lacks_a_reason,
)
from domain.vocabulary import RESETS, ROLES
from web.dataset_drafts import MAX_DRAFT_CHARS
from web.fields import BoundedText, Follows, PageForm, SubmissionKeyField, UUIDField, WholeNumberField

ROLE = Follows(one_of(*ROLES), "Role")
TOKEN_NAME = f"Give the token a name of 1 to {NAME_CHARS} characters."
NEEDS_A_REASON = "Enter a reason to exclude the trial: what makes it unfit for training."


class ReasonToExclude:
    """The validator of a reason field beside a review state (`state`, the form's field that says it): excluding
    needs a reason (domain.triage.lacks_a_reason, the write's rule), said under the reason in the page's words, so
    the page shows it beside the form's other refusals instead of after them."""

    def __init__(self, state: str) -> None:
        self.state = state

    def __call__(self, form: Any, field: Any) -> None:
        if lacks_a_reason(str(form[self.state].data or ""), field.data or ""):
            raise StopValidation(NEEDS_A_REASON)


class LoginForm(PageForm):
    """Email and password, and where to go next."""

    email = EmailField("Email", validators=[DataRequired()])
    password = PasswordField("Password", validators=[DataRequired()])
    next = HiddenField()


class SwitchOrgForm(PageForm):
    """The organization to work in (the view checks the user belongs to it)."""

    organization_id = UUIDField(
        validators=[DataRequired("organization_id must be the id of one of your organizations.")]
    )
    next = HiddenField()  # where to go once switched (a same-origin path; else the environments list)


class InviteForm(PageForm):
    """An owner invites an email with a role (the email's shape is checked by writes.invitations.invite)."""

    email = BoundedText(320, validators=[DataRequired("Enter the new member's email.")])
    role = BoundedText(20, validators=[ROLE], default="member")


class RoleForm(PageForm):
    """A member's new role."""

    role = BoundedText(20, validators=[ROLE])


class TokenForm(PageForm):
    """A new API token's name."""

    name = BoundedText(NAME_CHARS * 5, validators=[Follows(NAME, "Name", TOKEN_NAME)])  # NAME, as create-token holds it


class NewAccountForm(PageForm):
    """An invitee's own password (twice) and optional name."""

    name = StringField(default="", filters=[str.strip])
    password = PasswordField(
        validators=[
            Length(min=MIN_PASSWORD_LENGTH, message=f"Password must be at least {MIN_PASSWORD_LENGTH} characters.")
        ]
    )
    password_confirmation = PasswordField(validators=[EqualTo("password", "The two passwords differ.")])


class StartRunForm(PageForm):
    """A version of the environment, an evaluator configuration and an optional attemptCount."""

    environment_version_id = UUIDField(validators=[DataRequired("Choose an environment version.")])
    evaluator_config_id = UUIDField(validators=[DataRequired("Choose an evaluator configuration.")])
    attempt_count = WholeNumberField(validators=[Optional(), Follows(ATTEMPT_COUNT, "Attempt count")])
    submission_key = SubmissionKeyField()


class StartDatasetRunForm(PageForm):
    """A dataset version, an evaluator configuration and an optional attemptCount (trials per task)."""

    dataset_version_id = UUIDField(validators=[DataRequired("Choose a dataset version.")])
    evaluator_config_id = UUIDField(validators=[DataRequired("Choose an evaluator configuration.")])
    attempt_count = WholeNumberField(validators=[Optional(), Follows(ATTEMPT_COUNT, "Attempt count")])
    submission_key = SubmissionKeyField()


class ResetForm(PageForm):
    """How to reset a run: a mode a user may ask for."""

    mode = BoundedText(40, validators=[Follows(one_of(*RESETS), "mode")])
    submission_key = SubmissionKeyField()
    # The newest reset of the run when the confirmation was shown (none: ""): a reset made since then means this
    # confirmation was already used (or overtaken), and it queues nothing.
    seen = UUIDField()


class LabelForm(PageForm):
    """A new label of the organization's set: a name, a colour of the palette, a description."""

    name = BoundedText(LABEL_NAME_CHARS * 4, validators=[Follows(LABEL_NAME, "Name")])
    color = BoundedText(20, validators=[Optional(), Follows(LABEL_COLOR, "Colour")])  # blank: gray
    description = BoundedText(LABEL_DESCRIPTION_CHARS * 2, validators=[Follows(LABEL_DESCRIPTION, "Description")])


class TrialLabelForm(PageForm):
    """A label of the set to put on a trial."""

    label_id = UUIDField(validators=[DataRequired("Choose a label.")])


class ReviewForm(PageForm):
    """A trial's review state (excluded needs a reason, as writes.triage also says) and human failure category
    (blank: the verifier's)."""

    review_state = BoundedText(20, validators=[Follows(REVIEW_STATE, "Review state")], default="unreviewed")
    reason = BoundedText(REASON_CHARS * 2, validators=[Follows(REASON, "Reason"), ReasonToExclude("review_state")])
    human_category = BoundedText(200, validators=[Optional(), Follows(HUMAN_CATEGORY, "Human category")])


class NoteForm(PageForm):
    """A note's text (its length is writes.triage's rule, 422 past NOTE_CHARS) and, for a new note, its step."""

    body = StringField(default="", validators=[Follows(NOTE_BODY, "Note")])
    step = WholeNumberField(validators=[Optional()])


class DatasetForm(PageForm):
    """A new dataset: its name (unique in the organization, which the view checks) and description."""

    name = BoundedText(1000, validators=[Follows(DATASET_NAME, "Name")])
    description = BoundedText(8000, validators=[Follows(DATASET_DESCRIPTION, "Description")])


DRAFT_ACTIONS = ("add", "preview", "save")


class DatasetDraftForm(PageForm):
    """A dataset version being built (web.dataset_drafts): the task list so far, what to add to it (an environment
    version and N tasks of it, world seeds 1..N, or its world seeds as written), the sha256 of the list last
    previewed (Save saves only a previewed list), and the button pressed."""

    draft = BoundedText(MAX_DRAFT_CHARS)
    environment_version_id = UUIDField()
    count = WholeNumberField(validators=[Optional(), Follows(TASK_COUNT, "N")])
    world_seeds = BoundedText(MAX_DRAFT_CHARS)
    previewed = BoundedText(64)
    action = BoundedText(20, validators=[Follows(one_of(*DRAFT_ACTIONS), "action")], default="preview")


def csrf_field() -> Markup:
    """The hidden `csrf_token` input of the session's CSRF token (Flask-WTF checks it on every POST)."""
    return Markup('<input type="hidden" name="csrf_token" value="{}">').format(generate_csrf())


def form_helpers(app: Flask) -> None:
    """Make csrf_field available to every template."""
    app.jinja_env.globals["csrf_field"] = csrf_field
