# Cross-compiles for a Cortex-M4F with the bare-metal GNU toolchain
# (Debian: gcc-arm-none-eabi, libstdc++-arm-none-eabi-newlib). Used by
# examples/cortex_m4; Sluice selects its bare-metal configuration by itself
# on M-profile targets (see docs/embedded.md).
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_CXX_COMPILER arm-none-eabi-g++)
# No operating system to link a test program against while configuring.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(sluice_cortex_m4_flags "-mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16")
set(CMAKE_C_FLAGS_INIT "${sluice_cortex_m4_flags} -ffunction-sections -fdata-sections")
set(CMAKE_CXX_FLAGS_INIT
    "${sluice_cortex_m4_flags} -ffunction-sections -fdata-sections -fno-exceptions -fno-rtti")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,--gc-sections")
