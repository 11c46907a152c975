/*
 * unsupported.c: NVML functions Cicada does not serve, exported anyway.
 * Tools and bindings (pynvml, PyTorch, monitoring agents) look many NVML
 * names up when they load the library, and some refuse to start if one
 * is missing, though most then tolerate NVML_ERROR_NOT_SUPPORTED, which
 * real GPUs also answer for features they lack. Each of these returns it
 * and says so once (CICADA_LOG=debug). Setters are among them: the GPU's
 * configuration is the server's.
 *
 * The stubs take no parameters: in the C calling conventions of the
 * platforms Cicada runs on the caller removes what it passed, so a stub
 * that reads none of its arguments may be called with any.
 */
#include "nvml-lib.h"

#define UNSUPPORTED(name)				\
	nvmlReturn_t name(void);			\
	nvmlReturn_t name(void)				\
	{						\
		return nvml_unsupported(#name);		\
	}

/* system, units, events */
UNSUPPORTED(nvmlSystemGetProcessName)
UNSUPPORTED(nvmlSystemGetHicVersion)
UNSUPPORTED(nvmlSystemGetTopologyGpuSet)
UNSUPPORTED(nvmlUnitGetCount)
UNSUPPORTED(nvmlUnitGetHandleByIndex)
UNSUPPORTED(nvmlEventSetCreate)
UNSUPPORTED(nvmlEventSetWait)
UNSUPPORTED(nvmlEventSetWait_v2)
UNSUPPORTED(nvmlEventSetFree)
UNSUPPORTED(nvmlDeviceRegisterEvents)
UNSUPPORTED(nvmlDeviceGetSupportedEventTypes)

/* identity and board */
UNSUPPORTED(nvmlDeviceGetHandleBySerial)
UNSUPPORTED(nvmlDeviceGetBoardId)
UNSUPPORTED(nvmlDeviceGetBoardPartNumber)
UNSUPPORTED(nvmlDeviceGetMultiGpuBoard)
UNSUPPORTED(nvmlDeviceGetModuleId)
UNSUPPORTED(nvmlDeviceGetMemoryBusWidth)
UNSUPPORTED(nvmlDeviceGetBusType)
UNSUPPORTED(nvmlDeviceGetIrqNum)
UNSUPPORTED(nvmlDeviceGetVbiosVersion)
UNSUPPORTED(nvmlDeviceGetInforomVersion)
UNSUPPORTED(nvmlDeviceGetInforomImageVersion)
UNSUPPORTED(nvmlDeviceGetInforomConfigurationChecksum)
UNSUPPORTED(nvmlDeviceGetGspFirmwareVersion)
UNSUPPORTED(nvmlDeviceGetGspFirmwareMode)
UNSUPPORTED(nvmlDeviceGetDriverModel)
UNSUPPORTED(nvmlDeviceGetDisplayMode)
UNSUPPORTED(nvmlDeviceGetDisplayActive)
UNSUPPORTED(nvmlDeviceGetGpuOperationMode)
UNSUPPORTED(nvmlDeviceGetVirtualizationMode)
UNSUPPORTED(nvmlDeviceGetHostVgpuMode)
UNSUPPORTED(nvmlDeviceGetPlatformInfo)
UNSUPPORTED(nvmlDeviceGetPowerSource)

/* PCIe and topology */
UNSUPPORTED(nvmlDeviceGetCurrPcieLinkGeneration)
UNSUPPORTED(nvmlDeviceGetCurrPcieLinkWidth)
UNSUPPORTED(nvmlDeviceGetMaxPcieLinkGeneration)
UNSUPPORTED(nvmlDeviceGetMaxPcieLinkWidth)
UNSUPPORTED(nvmlDeviceGetGpuMaxPcieLinkGeneration)
UNSUPPORTED(nvmlDeviceGetPcieLinkMaxSpeed)
UNSUPPORTED(nvmlDeviceGetPcieSpeed)
UNSUPPORTED(nvmlDeviceGetPcieThroughput)
UNSUPPORTED(nvmlDeviceGetPcieReplayCounter)
UNSUPPORTED(nvmlDeviceGetBridgeChipInfo)
UNSUPPORTED(nvmlDeviceGetCpuAffinity)
UNSUPPORTED(nvmlDeviceGetCpuAffinityWithinScope)
UNSUPPORTED(nvmlDeviceGetMemoryAffinity)
UNSUPPORTED(nvmlDeviceGetTopologyCommonAncestor)
UNSUPPORTED(nvmlDeviceGetTopologyNearestGpus)
UNSUPPORTED(nvmlDeviceOnSameBoard)

/* NVLink beyond its state */
UNSUPPORTED(nvmlDeviceGetNvLinkVersion)
UNSUPPORTED(nvmlDeviceGetNvLinkErrorCounter)
UNSUPPORTED(nvmlDeviceGetNvLinkUtilizationCounter)

/* clocks, power, thermals */
UNSUPPORTED(nvmlDeviceGetClock)
UNSUPPORTED(nvmlDeviceGetApplicationsClock)
UNSUPPORTED(nvmlDeviceGetDefaultApplicationsClock)
UNSUPPORTED(nvmlDeviceGetSupportedMemoryClocks)
UNSUPPORTED(nvmlDeviceGetSupportedGraphicsClocks)
UNSUPPORTED(nvmlDeviceGetAutoBoostedClocksEnabled)
UNSUPPORTED(nvmlDeviceGetCurrentClocksThrottleReasons)
UNSUPPORTED(nvmlDeviceGetCurrentClocksEventReasons)
UNSUPPORTED(nvmlDeviceGetSupportedClocksThrottleReasons)
UNSUPPORTED(nvmlDeviceGetSupportedClocksEventReasons)
UNSUPPORTED(nvmlDeviceGetClkMonStatus)
UNSUPPORTED(nvmlDeviceGetViolationStatus)
UNSUPPORTED(nvmlDeviceGetPerformanceState)
UNSUPPORTED(nvmlDeviceGetPowerState)
UNSUPPORTED(nvmlDeviceGetDynamicPstatesInfo)
UNSUPPORTED(nvmlDeviceGetPowerManagementMode)
UNSUPPORTED(nvmlDeviceGetPowerManagementLimit)
UNSUPPORTED(nvmlDeviceGetPowerManagementDefaultLimit)
UNSUPPORTED(nvmlDeviceGetPowerManagementLimitConstraints)
UNSUPPORTED(nvmlDeviceGetTotalEnergyConsumption)
UNSUPPORTED(nvmlDeviceGetTemperatureV)
UNSUPPORTED(nvmlDeviceGetTemperatureThreshold)
UNSUPPORTED(nvmlDeviceGetMarginTemperature)
UNSUPPORTED(nvmlDeviceGetThermalSettings)
UNSUPPORTED(nvmlDeviceGetFanSpeed)
UNSUPPORTED(nvmlDeviceGetFanSpeed_v2)
UNSUPPORTED(nvmlDeviceGetNumFans)

/* utilization, samples, processes beyond compute */
UNSUPPORTED(nvmlDeviceGetEncoderUtilization)
UNSUPPORTED(nvmlDeviceGetDecoderUtilization)
UNSUPPORTED(nvmlDeviceGetJpgUtilization)
UNSUPPORTED(nvmlDeviceGetOfaUtilization)
UNSUPPORTED(nvmlDeviceGetEncoderCapacity)
UNSUPPORTED(nvmlDeviceGetEncoderStats)
UNSUPPORTED(nvmlDeviceGetEncoderSessions)
UNSUPPORTED(nvmlDeviceGetFBCStats)
UNSUPPORTED(nvmlDeviceGetFBCSessions)
UNSUPPORTED(nvmlDeviceGetSamples)
UNSUPPORTED(nvmlDeviceGetProcessUtilization)
UNSUPPORTED(nvmlDeviceGetProcessesUtilizationInfo)
UNSUPPORTED(nvmlDeviceGetRunningProcessDetailList)
UNSUPPORTED(nvmlDeviceGetGraphicsRunningProcesses)
UNSUPPORTED(nvmlDeviceGetGraphicsRunningProcesses_v2)
UNSUPPORTED(nvmlDeviceGetGraphicsRunningProcesses_v3)
UNSUPPORTED(nvmlDeviceGetMPSComputeRunningProcesses)
UNSUPPORTED(nvmlDeviceGetMPSComputeRunningProcesses_v2)
UNSUPPORTED(nvmlDeviceGetMPSComputeRunningProcesses_v3)
UNSUPPORTED(nvmlDeviceGetAccountingMode)
UNSUPPORTED(nvmlDeviceGetAccountingStats)
UNSUPPORTED(nvmlDeviceGetAccountingPids)
UNSUPPORTED(nvmlDeviceGetAccountingBufferSize)
UNSUPPORTED(nvmlGpmQueryDeviceSupport)
UNSUPPORTED(nvmlGpmSampleAlloc)
UNSUPPORTED(nvmlGpmSampleFree)
UNSUPPORTED(nvmlGpmSampleGet)
UNSUPPORTED(nvmlGpmMetricsGet)

/* ECC and memory health */
UNSUPPORTED(nvmlDeviceGetEccMode)
UNSUPPORTED(nvmlDeviceGetTotalEccErrors)
UNSUPPORTED(nvmlDeviceGetDetailedEccErrors)
UNSUPPORTED(nvmlDeviceGetMemoryErrorCounter)
UNSUPPORTED(nvmlDeviceGetRetiredPages)
UNSUPPORTED(nvmlDeviceGetRetiredPages_v2)
UNSUPPORTED(nvmlDeviceGetRetiredPagesPendingStatus)
UNSUPPORTED(nvmlDeviceGetRemappedRows)
UNSUPPORTED(nvmlDeviceGetRowRemapperHistogram)
UNSUPPORTED(nvmlDeviceGetConfComputeMemSizeInfo)

/* MIG beyond its mode */
UNSUPPORTED(nvmlDeviceIsMigDeviceHandle)
UNSUPPORTED(nvmlDeviceGetMaxMigDeviceCount)
UNSUPPORTED(nvmlDeviceGetMigDeviceHandleByIndex)
UNSUPPORTED(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)
UNSUPPORTED(nvmlDeviceGetGpuInstanceId)
UNSUPPORTED(nvmlDeviceGetComputeInstanceId)
UNSUPPORTED(nvmlDeviceGetGpuInstances)

/* setters: the configuration is the server's */
UNSUPPORTED(nvmlDeviceSetPersistenceMode)
UNSUPPORTED(nvmlDeviceSetComputeMode)
UNSUPPORTED(nvmlDeviceSetEccMode)
UNSUPPORTED(nvmlDeviceClearEccErrorCounts)
UNSUPPORTED(nvmlDeviceSetApplicationsClocks)
UNSUPPORTED(nvmlDeviceResetApplicationsClocks)
UNSUPPORTED(nvmlDeviceSetAutoBoostedClocksEnabled)
UNSUPPORTED(nvmlDeviceSetGpuLockedClocks)
UNSUPPORTED(nvmlDeviceResetGpuLockedClocks)
UNSUPPORTED(nvmlDeviceSetMemoryLockedClocks)
UNSUPPORTED(nvmlDeviceResetMemoryLockedClocks)
UNSUPPORTED(nvmlDeviceSetPowerManagementLimit)
UNSUPPORTED(nvmlDeviceSetMigMode)
UNSUPPORTED(nvmlDeviceSetAccountingMode)
UNSUPPORTED(nvmlDeviceClearAccountingPids)
