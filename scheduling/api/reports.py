"""Capacity reports over the API: list, detail (content as the reader may see it), downloads, subscription."""

from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduling.models import CapacityReport, ReportSubscription
from scheduling.reports import documents as reports
from scheduling.selectors import access
from scheduling.selectors import report as report_reads
from scheduling.services import report_delivery
from scheduling.views.reports import rendered

from .list_cache import CachedListMixin


class CapacityReportSerializer(serializers.ModelSerializer):
    downloads = serializers.SerializerMethodField()

    class Meta:
        model = CapacityReport
        fields = [
            "id",
            "period_start",
            "period_end",
            "time_zone",
            "status",
            "generated_at",
            "sent_at",
            "recipients",
            "downloads",
        ]

    def get_downloads(self, report) -> dict[str, str]:
        request = self.context["request"]
        return {
            fmt: request.build_absolute_uri(reverse("capacityreport-download", args=[report.pk, fmt]))
            for fmt in ("html", "pdf", "csv")
        }


class CapacityReportDetailSerializer(CapacityReportSerializer):
    content = serializers.SerializerMethodField()

    class Meta(CapacityReportSerializer.Meta):
        fields = [*CapacityReportSerializer.Meta.fields, "content"]

    def get_content(self, report) -> dict:
        return reports.visible_content(report.content, access.report_scope(self.context["request"].user))


class SubscriptionSerializer(serializers.Serializer):
    format = serializers.ChoiceField(choices=ReportSubscription.Format.choices)


class CapacityReportViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    """Every signed-in user reads the fleet report; per-user rows follow the page's rule."""

    queryset = CapacityReport.objects.none()
    filterset_fields = ["status"]

    def get_queryset(self):
        if self.action == "list":
            return report_reads.stored_reports().order_by("-period_start")
        return report_reads.generated_reports()

    def get_serializer_class(self):
        return CapacityReportDetailSerializer if self.action == "retrieve" else CapacityReportSerializer

    @extend_schema(responses={200: OpenApiResponse(description="The report as HTML, PDF or CSV")})
    @action(detail=True, methods=["get"], url_path=r"download/(?P<fmt>html|pdf|csv)", url_name="download")
    def download(self, request, pk=None, fmt="html"):
        report = self.get_object()
        return rendered(report, fmt, access.report_scope(request.user))


class ReportSubscriptionView(APIView):
    """The caller's own subscription to the weekly report: GET it, PUT a format, DELETE to unsubscribe."""

    permission_classes = [IsAuthenticated]
    serializer_class = SubscriptionSerializer

    @extend_schema(responses={200: SubscriptionSerializer, 404: None})
    def get(self, request):
        current = report_delivery.subscription_of(request.user)
        if current is None:
            return Response({"detail": "Not subscribed."}, status=status.HTTP_404_NOT_FOUND)
        return Response(SubscriptionSerializer({"format": current.format}).data)

    @extend_schema(request=SubscriptionSerializer, responses={200: SubscriptionSerializer})
    def put(self, request):
        serializer = SubscriptionSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        report_delivery.subscribe(request.user, serializer.validated_data["format"])  # the format is validated
        return Response(serializer.data)

    @extend_schema(responses={204: None})
    def delete(self, request):
        report_delivery.unsubscribe(request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)
