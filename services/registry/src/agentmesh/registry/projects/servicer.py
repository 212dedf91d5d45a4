"""The project RPCs of RegistryService: proto in, proto out, mixed into `RegistryServicer`."""

from __future__ import annotations

import grpc

from agentmesh.registry import convert
from agentmesh.registry.models import Project
from agentmesh.registry.projects.registry import ProjectRegistry
from agentmesh.registry.v1 import registry_service_pb2 as pb
from agentmesh.runtime.identity import caller

Context = grpc.aio.ServicerContext


class ProjectRpcs:
    """Adapts the project RPCs to `ProjectRegistry`."""

    _projects: ProjectRegistry

    async def CreateProject(
        self, request: pb.CreateProjectRequest, context: Context
    ) -> pb.CreateProjectResponse:
        project = await self._projects.create(
            caller(), convert.project_fields(request.project), request_id=request.request_id
        )
        return pb.CreateProjectResponse(project=await self._project_message(project))

    async def GetProject(self, request: pb.GetProjectRequest, context: Context) -> pb.GetProjectResponse:
        project = await self._projects.get(caller(), project_id=request.id, slug=request.slug)
        return pb.GetProjectResponse(project=await self._project_message(project))

    async def ListProjects(
        self, request: pb.ListProjectsRequest, context: Context
    ) -> pb.ListProjectsResponse:
        page = await self._projects.list(
            caller(), page_size=request.page_size, page_token=request.page_token, page=request.page
        )
        return pb.ListProjectsResponse(
            projects=[await self._project_message(item) for item in page.items],
            next_page_token=page.next_page_token,
            total_size=page.total_size,
        )

    async def UpdateProject(
        self, request: pb.UpdateProjectRequest, context: Context
    ) -> pb.UpdateProjectResponse:
        project = await self._projects.update(
            caller(), request.project.id, convert.project_fields(request.project), request.update_mask.paths
        )
        return pb.UpdateProjectResponse(project=await self._project_message(project))

    async def DeleteProject(
        self, request: pb.DeleteProjectRequest, context: Context
    ) -> pb.DeleteProjectResponse:
        await self._projects.delete(caller(), request.id)
        return pb.DeleteProjectResponse()

    async def _project_message(self, project: Project) -> pb.Project:
        return convert.project_message(project, await self._projects.limits_in_force(project))
