"""The session commands: open, step, jump, replay, ... Each answers with the state."""
from __future__ import annotations

from irviz.protocol import commands as protocol
from irviz.protocol.commands import BadRequest, State, error_dict, import_error_fields
from irviz.engine.catalogue_commands import list_passes
from irviz.engine.generate_commands import generation_info
from irviz.engine.handler_context import EngineContext

# Imports of irviz.core modules that load torch or TVM stay inside the handlers: the engine says
# `ready` at once and imports them on a prewarm thread while the GUI is still drawing.


class SessionCommands:
    """The commands on the session (open, step, jump, replay, ...), each answering with the state."""

    def __init__(self, ctx: EngineContext):
        self.ctx = ctx

    def state(self) -> State:
        ws, s = self.ctx.ws, self.ctx.ws.session
        planned = [protocol.invocation(i.name, i.params) for i in ws.planned()]
        if s is None:
            if ws.import_error is None:
                return protocol.make_state(spec=ws.spec, importer=ws.importer, target=ws.target.name)
            err = error_dict(ws.import_error)
            return protocol.make_state(
                spec=ws.spec, importer=ws.importer, error=err, planned=planned,
                import_error=import_error_fields(ws.import_error, ws.loaded), converter_files=ws.converter_files,
                capture=ws.capture, importer_maps=ws.importer_maps, keep_params=ws.keep_params,
                structure_only=bool(getattr(ws.loaded, "structure_only", False)), target=ws.target.name,
                **_capture_fields(ws))
        self.ctx.views.prune()
        steps = [protocol.step_entry(st.index, st.pass_name, st.params, st.seconds, st.changed,
                                     st.changes.added, st.changes.removed, st.changes.changed,
                                     size=self.ctx.views.ir_size(st), changed_what=st.changed_what,
                                     notes=st.notes, origin=st.origin)
                 for st in s.steps]
        relax_names, tir_names = self.ctx.views.func_names(s.steps[s.cursor])
        return protocol.make_state(
            model=ws.model_name, spec=ws.spec, importer=ws.importer, cursor=s.cursor,
            error=error_dict(s.error) if s.error is not None else None, steps=steps,
            planned=planned, relax_functions=relax_names, tir_functions=tir_names,
            converter_files=ws.converter_files, run_functions=self.ctx.views.run_functions(s.steps[s.cursor]),
            capture=ws.capture, importer_maps=ws.importer_maps, pipeline_text=pipeline_text(s, ws.target.name),
            keep_params=ws.keep_params, params_file=ws.params_file, structure_only=ws.structure_only,
            target=ws.target.name, generation=generation_info(self.ctx), **_capture_fields(ws))

    def open(self, spec, importer=None, pipeline="zero", capture=None, importer_maps=None,
             keep_params=False, no_weights=False, graph=1) -> State:
        self.ctx.ws.open(spec, importer, planned=pipeline or "",
                     capture=capture, importer_maps=importer_maps, keep_params=bool(keep_params),
                     no_weights=bool(no_weights), graph=graph)
        self.ctx.progress("Ready", 1.0)
        self._schedule_failed()
        return self.state()

    def choose_graph(self, graph) -> State:
        self.ctx.ws.choose_graph(graph)
        self.ctx.progress("Ready", 1.0)
        return self.state()

    def _schedule_failed(self) -> None:
        """An IR file's schedule(sch) that stopped at a primitive: the open worked (the steps before
        it are there, and the error reply carries that state), but the learner must hear why."""
        s = self.ctx.ws.session
        if s is not None and s.schedule_error is not None:
            raise s.schedule_error

    def set_pipeline(self, pipeline=None, passes=None, text=None) -> State:
        """`pipeline`: a name, replacing the passes after the cursor; `passes`: [{name, params}],
        the same; `text`: a pipeline text for the whole pipeline from the import (a bad text
        changes nothing)."""
        from irviz.core.passes import get_pass

        self.ctx.ws.need_session()
        if text is not None:
            self.ctx.ws.set_pipeline(text, whole=True)
            return self.state()
        if passes is not None:
            chosen = invocations(passes)
            for inv in chosen:
                get_pass(inv.name)  # an unknown name fails now, not when it is stepped to
        elif pipeline is not None:
            chosen = pipeline
        else:
            raise BadRequest("set_pipeline needs `pipeline` (a name), `passes` [{name, params}] or `text`")
        self.ctx.ws.set_pipeline(chosen)
        return self.state()

    def set_target(self, target=None) -> State:
        """The target builds are for and the passes run under ("host" or null: the default); the
        applied passes run again under it, back to the same step."""
        self.ctx.ws.set_target(target)
        return self.state()

    def step(self) -> State:
        self.ctx.ws.step()
        return self.state()

    def back(self) -> State:
        self.ctx.ws.back()
        return self.state()

    def jump(self, index) -> State:
        self.ctx.ws.jump(index)
        return self.state()

    def run_to_end(self) -> State:
        self.ctx.ws.run_to_end()
        return self.state()

    def replay(self, spec, importer=None, applied=(), planned=(), cursor=None, pass_files=(),
               converter_files=(), capture=None, importer_maps=(), keep_params=False,
               no_weights=False, target=None, graph=1, generation=None) -> State:
        if generation:
            from irviz.engine.generate_commands import replay_generation

            replay_generation(self.ctx, spec, dict(generation), no_weights=bool(no_weights), cursor=cursor,
                              pass_files=pass_files)
            self.ctx.progress("Replayed", 1.0)
            return self.state()
        self.ctx.ws.replay(spec, importer, invocations(applied), invocations(planned), cursor,
                       pass_files, converter_files, capture=capture, importer_maps=importer_maps,
                       keep_params=bool(keep_params), no_weights=bool(no_weights), graph=graph,
                       target=target)
        self.ctx.progress("Replayed", 1.0)
        return self.state()  # a schedule that stopped at a primitive is in the state's error

    def remeasure(self) -> State:
        self.ctx.ws.remeasure()
        self.ctx.progress("Ready", 1.0)
        return self.state()

    def reimport(self) -> State:
        self.ctx.ws.reimport()
        self.ctx.progress("Ready", 1.0)
        return self.state()

    def load_converters(self, path) -> dict:
        """Execute a converter file (afresh) and keep it for every later import."""
        table = self.ctx.ws.add_converter_file(path)
        files = self.ctx.ws.converter_files
        return {"path": files[-1], "ops": sorted(table), "files": list(files)}

    def load_pass_file(self, path) -> list[dict]:
        from irviz.core.passes import BUILTIN_PREFIX, find_pass, load_pass_file

        users_before = {s.name for s in self._user_passes()}
        loaded = load_pass_file(path)
        self.ctx.ws.keep_builtins(s.name for s in loaded if s.name not in users_before
                              and find_pass(BUILTIN_PREFIX + s.name) is not None)
        return list_passes()

    @staticmethod
    def _user_passes() -> list:
        from irviz.core.passes import list_passes

        return [s for s in list_passes() if s.category == "user"]


def _capture_fields(ws) -> dict:
    split = ws.graph_breaks
    return {"capture_fallback": ws.capture_fallback, "capture_notes": ws.capture_notes,
            "graph_breaks": split.describe() if split is not None else None}


def pipeline_text(session, target=None) -> str:
    from irviz.core.passes import pipeline_text as text_of

    return text_of(session.full_pipeline(), target)


def invocations(items) -> list:
    from irviz.core.passes import PassInvocation

    out = []
    for it in items or []:
        if isinstance(it, str):
            out.append(PassInvocation(it, {}))
        elif isinstance(it, dict) and "name" in it:
            out.append(PassInvocation(it["name"], dict(it.get("params") or {})))
        else:
            raise BadRequest(f"Bad pass entry {it!r}: expected {{name, params}}")
    return out
